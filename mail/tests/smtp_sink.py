"""A real SMTP server for the mail tests (Debian's python3-aiosmtpd): saves every message it
receives as NNN.eml in DIR, after a first line saying how it came
(`X-Sink-Session: tls=yes|no login=NAME|-`). Prints "ready" once listening and stops when its
standard input closes.

Usage: smtp_sink.py PORT DIR [--tls CERT KEY] [--login USER PASSWORD] [--login-without-tls]
  --tls                offer STARTTLS with this certificate chain and key (PEM)
  --login              accept this login (AUTH PLAIN/LOGIN); every attempt is appended to
                       DIR.logins as `NAME PASSWORD tls=yes|no ok|refused`
  --login-without-tls  offer AUTH before STARTTLS too (as a careless server does)
"""
import argparse
import logging
import os
import ssl
import sys
import warnings

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

parser = argparse.ArgumentParser()
parser.add_argument("port", type=int)
parser.add_argument("directory")
parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
parser.add_argument("--login", nargs=2, metavar=("USER", "PASSWORD"))
parser.add_argument("--login-without-tls", action="store_true")
args = parser.parse_args()
directory = args.directory
# A client refusing the certificate is what some tests want: no traceback for it.
logging.getLogger("mail.log").setLevel(logging.CRITICAL)
warnings.filterwarnings("ignore", message="Session.login_data is deprecated")


class Save:
    async def handle_DATA(self, server, session, envelope):
        n = len(os.listdir(directory))
        tls = "yes" if session.ssl is not None else "no"
        login = session.auth_data.login.decode() if session.authenticated else "-"
        with open(os.path.join(directory, "%03d.eml" % n), "wb") as f:
            f.write(b"X-Sink-Session: tls=%s login=%s\r\n" % (tls.encode(), login.encode()))
            f.write(envelope.content)
        return "250 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    login, password = auth_data.login.decode(), auth_data.password.decode()
    ok = (login, password) == tuple(args.login)
    with open(directory.rstrip("/") + ".logins", "a") as f:
        tls = "yes" if session.ssl is not None else "no"
        f.write("%s %s tls=%s %s\n" % (login, password, tls, "ok" if ok else "refused"))
    return AuthResult(success=ok, auth_data=auth_data)


options = {}
if args.tls:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*args.tls)
    options["tls_context"] = context
if args.login:
    options["authenticator"] = authenticator
    options["auth_require_tls"] = not args.login_without_tls

controller = Controller(Save(), hostname="127.0.0.1", port=args.port, **options)
controller.start()
print("ready", flush=True)
sys.stdin.read()
controller.stop()

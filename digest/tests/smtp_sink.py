"""A real SMTP server for the mail tests (Debian's python3-aiosmtpd): saves every message it
receives as NNN.eml in DIR. Usage: smtp_sink.py PORT DIR. Prints "ready" once listening and
stops when its standard input closes."""
import os
import sys

from aiosmtpd.controller import Controller

port, directory = int(sys.argv[1]), sys.argv[2]


class Save:
    async def handle_DATA(self, server, session, envelope):
        n = len(os.listdir(directory))
        with open(os.path.join(directory, "%03d.eml" % n), "wb") as f:
            f.write(envelope.content)
        return "250 OK"


controller = Controller(Save(), hostname="127.0.0.1", port=port)
controller.start()
print("ready", flush=True)
sys.stdin.read()
controller.stop()

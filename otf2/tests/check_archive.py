#!/usr/bin/python3
"""Reads an OTF2 archive that mpistat exported with Python's otf2 (an independent reader) and
checks it against mpistat's own trace, event by event: every event where the documented
mapping (otf2/src/write.rs) puts it, with its time, region, peer (as a world rank),
communicator, tag, size and request; then the messages: every send has its receive (per
sender, receiver, communicator and tag, in order) of the same size.

    check_archive.py ARCHIVE EXPECTED.json [--causal]

EXPECTED.json: {"ticks_per_second", "regions": [[name, site, collective]], "ranks": [[event]]}
with events as lists: ["enter", t, region], ["exit", t], ["send", t, peer, tag, comm, bytes],
["recv", t, peer, tag, comm, bytes], ["post", t, request], ["complete", t, request],
["cexit", t, comm, root or null, sent, received]. --causal: every receive ends at or after its
send started (synthetic traces; a real job's clocks are only corrected to within their error).
"""
import collections
import json
import sys

import otf2

UNDEFINED = 0xFFFFFFFF


def expected_records(events, regions):
    """mpistat's events of one rank as the OTF2 records the export writes (see write.rs)."""
    out, stack, sends, pending = [], [], set(), None

    def site(region):
        return tuple(regions[region][:2])

    def alone(e):
        kind, t = e[0], e[1]
        if kind == "enter":
            stack.append(e[2])
            out.append(("Enter", t) + site(e[2]))
        elif kind == "exit":
            out.append(("Leave", t) + site(stack.pop()))
        elif kind == "send":
            out.append(("Send", t, e[2], e[4], e[3] & UNDEFINED, e[5], None))
        elif kind == "recv":
            out.append(("Recv", t, e[2], e[4], e[3] & UNDEFINED, e[5], None))
        elif kind == "post":
            out.append(("IrecvRequest", t, e[2]))
        elif kind == "complete" and e[2] in sends:
            sends.discard(e[2])
            out.append(("IsendComplete", t, e[2]))
        elif kind == "complete":
            out.append(("Recv", t, None, None, UNDEFINED, 0, e[2]))
        elif kind == "cexit":
            out.append(("CollectiveBegin", t))
            collective_end(e)

    def collective_end(e):
        region = stack.pop()
        out.append(("CollectiveEnd", e[1], e[2], e[3], e[4], e[5]))
        out.append(("Leave", e[1]) + site(region))

    def combined(first, second):
        if first[0] == "send" and second[0] == "post":
            out.append(("Send", first[1], first[2], first[4], first[3] & UNDEFINED, first[5],
                        second[2]))
            sends.add(second[2])
        elif first[0] == "complete" and second[0] == "recv" and first[1] == second[1]:
            out.append(("Recv", second[1], second[2], second[4], second[3] & UNDEFINED,
                        second[5], first[2]))
        elif first[0] == "enter" and second[0] == "cexit":
            stack.append(first[2])
            out.append(("Enter", first[1]) + site(first[2]))
            out.append(("CollectiveBegin", first[1]))
            collective_end(second)
        else:
            return False
        return True

    for e in events:
        if pending is not None:
            if combined(pending, e):
                pending = None
                continue
            alone(pending)
            pending = None
        if e[0] in ("send", "complete") or (e[0] == "enter" and regions[e[2]][2]):
            pending = e
        else:
            alone(e)
    if pending is not None:
        alone(pending)
    return out


def main():
    archive, expected_path = sys.argv[1], sys.argv[2]
    causal = "--causal" in sys.argv[3:]
    with open(expected_path) as f:
        expected = json.load(f)
    regions = expected["regions"]
    with otf2.reader.open(archive) as trace:
        defs = trace.definitions
        resolution = defs.clock_properties.timer_resolution
        assert resolution == expected["ticks_per_second"], resolution
        mpi = [g for g in defs.groups if g.group_type == otf2.GroupType.COMM_LOCATIONS]
        assert len(mpi) == 1, "one MPI locations group"
        rank_of = {location: rank for rank, location in enumerate(mpi[0].members)}
        comms = list(defs.comms)

        def world(comm, local):
            if local == UNDEFINED:
                return None
            return rank_of[comm.group.members[local]]

        def text(string):
            return "" if string is None else str(string)

        def site(region):
            file, line = text(region.source_file), region.begin_line_number
            return (region.name, file if line == 0 else "{}:{}".format(file, line))

        got = collections.defaultdict(list)
        for location, e in trace.events:
            t = e.time
            if isinstance(e, otf2.events.Enter):
                record = ("Enter", t) + site(e.region)
            elif isinstance(e, otf2.events.Leave):
                record = ("Leave", t) + site(e.region)
            elif isinstance(e, (otf2.events.MpiSend, otf2.events.MpiIsend)):
                request = getattr(e, "request_id", None)
                record = ("Send", t, world(e.communicator, e.receiver),
                          comms.index(e.communicator), e.msg_tag, e.msg_length, request)
            elif isinstance(e, (otf2.events.MpiRecv, otf2.events.MpiIrecv)):
                request = getattr(e, "request_id", None)
                if e.sender == UNDEFINED:
                    record = ("Recv", t, None, None, e.msg_tag, e.msg_length, request)
                else:
                    record = ("Recv", t, world(e.communicator, e.sender),
                              comms.index(e.communicator), e.msg_tag, e.msg_length, request)
            elif isinstance(e, otf2.events.MpiIrecvRequest):
                record = ("IrecvRequest", t, e.request_id)
            elif isinstance(e, otf2.events.MpiIsendComplete):
                record = ("IsendComplete", t, e.request_id)
            elif isinstance(e, otf2.events.MpiCollectiveBegin):
                record = ("CollectiveBegin", t)
            elif isinstance(e, otf2.events.MpiCollectiveEnd):
                record = ("CollectiveEnd", t, comms.index(e.communicator),
                          world(e.communicator, e.root), e.size_sent, e.size_received)
            else:
                sys.exit("unexpected event {} on {}".format(type(e).__name__, location))
            got[rank_of[location]].append(record)

    total = 0
    for rank, events in enumerate(expected["ranks"]):
        want = [tuple(r) for r in expected_records(events, regions)]
        have = got.get(rank, [])
        for index, (w, h) in enumerate(zip(want, have)):
            if w != h:
                sys.exit("rank {}, event {}: expected {}, the archive has {}".format(
                    rank, index, w, h))
        if len(want) != len(have):
            sys.exit("rank {}: expected {} events, the archive has {}".format(
                rank, len(want), len(have)))
        total += len(have)
    assert set(got) <= set(range(len(expected["ranks"]))), "events of unknown ranks"

    sends, receives = collections.defaultdict(list), collections.defaultdict(list)
    for rank, records in got.items():
        for r in records:
            if r[0] == "Send":
                sends[(rank, r[2], r[3], r[4])].append((r[1], r[5]))
            elif r[0] == "Recv" and r[2] is not None:
                receives[(r[2], rank, r[3], r[4])].append((r[1], r[5]))
    messages = 0
    for channel in set(sends) | set(receives):
        s, r = sends.get(channel, []), receives.get(channel, [])
        if len(s) != len(r):
            sys.exit("channel {}: {} sends, {} receives".format(channel, len(s), len(r)))
        for (sent_at, sent), (received_at, received) in zip(s, r):
            if sent != received:
                sys.exit("channel {}: {} bytes sent, {} received".format(channel, sent, received))
            if causal and received_at < sent_at:
                sys.exit("channel {}: received at {} before sent at {}".format(
                    channel, received_at, sent_at))
            messages += 1
    print("ok: {} events, {} messages matched".format(total, messages))


if __name__ == "__main__":
    main()

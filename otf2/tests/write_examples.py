#!/usr/bin/python3
"""Writes the seed documents' worked examples as OTF2 archives with Python's otf2, laid out as
Score-P lays out an MPI trace (a process and a master thread per rank, the MPI locations group,
MPI_COMM_WORLD, MPI regions and events, timestamps far from 0), for the import tests
(otf2/tests/import_examples.rs).

    write_examples.py OUT_DIR EXAMPLE

Examples (times in ticks of 1 ms; `work` is the program's own time):
  late_sender    rank 0 works 5 before its MPI_Send; rank 1 waits in MPI_Recv
  late_receiver  rank 1 works 5 before its MPI_Recv; rank 0 waits in MPI_Ssend
  nxn            rank 1 works 6 longer before an MPI_Allreduce of 3 ranks
  barrier        rank 3 works 8, the others 4, before an MPI_Barrier of 4 ranks; rank 0 also
                 has an OpenMP thread, an OpenMP region and a metric (skipped with a note)
  figure2        Boehme et al., "Identifying the root causes of wait states", Fig. 2
  figure3        the same paper, Fig. 3
"""
import sys

import otf2
from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole

OFFSET = 1_000_000  # Score-P's timestamps start far from 0


class Job:
    def __init__(self, trace, ranks, extra_thread=False):
        self.trace = trace
        d = trace.definitions
        node = d.system_tree_node("node")
        self.groups = [d.location_group("MPI Rank {}".format(r), system_tree_parent=node)
                       for r in range(ranks)]
        self.locations = [d.location("Master thread", type=LocationType.CPU_THREAD, group=g)
                          for g in self.groups]
        if extra_thread:
            self.thread = d.location("OMP thread 1", type=LocationType.CPU_THREAD,
                                     group=self.groups[0])
        d.group("MPI", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                members=self.locations)
        world = d.group("world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                        members=list(range(ranks)))
        self.world = d.comm("MPI_COMM_WORLD", group=world)
        self.writers = [trace.event_writer_from_location(l) for l in self.locations]
        self.regions = {}
        self.clock = [0] * ranks

    def region(self, name, site=""):
        key = (name, site)
        if key not in self.regions:
            mpi = name.startswith("MPI_")
            role = RegionRole.FUNCTION
            if mpi:
                role = {"MPI_Barrier": RegionRole.BARRIER,
                        "MPI_Allreduce": RegionRole.COLL_ALL2ALL}.get(name, RegionRole.POINT2POINT)
            file, _, line = site.partition(":")
            self.regions[key] = self.trace.definitions.region(
                name, canonical_name=name, region_role=role,
                paradigm=Paradigm.MPI if mpi else Paradigm.USER,
                source_file=file or None, begin_line_number=int(line or 0))
        return self.regions[key]

    def compute(self, rank, name, duration):
        region, t = self.region(name), self.clock[rank]
        self.writers[rank].enter(OFFSET + t, region)
        self.writers[rank].leave(OFFSET + t + duration, region)
        self.clock[rank] = t + duration

    def message(self, sender, send_site, receiver, recv_site, synchronous=False, recv_cost=1):
        send = self.region("MPI_Ssend" if synchronous else "MPI_Send", send_site)
        recv = self.region("MPI_Recv", recv_site)
        s, r = self.clock[sender], self.clock[receiver]
        arrival = max(s, r) + recv_cost
        send_leave = max(s, r) if synchronous else s
        w = self.writers[sender]
        w.enter(OFFSET + s, send)
        w.mpi_send(OFFSET + s, receiver, self.world, 0, 8)
        w.leave(OFFSET + send_leave, send)
        w = self.writers[receiver]
        w.enter(OFFSET + r, recv)
        w.mpi_recv(OFFSET + arrival, sender, self.world, 0, 8)
        w.leave(OFFSET + arrival, recv)
        self.clock[sender], self.clock[receiver] = send_leave, arrival

    def collective(self, name, site, op):
        region = self.region(name, site)
        last = max(self.clock)
        for rank, w in enumerate(self.writers):
            w.enter(OFFSET + self.clock[rank], region)
            w.mpi_collective_begin(OFFSET + self.clock[rank])
            w.mpi_collective_end(OFFSET + last, op, self.world, 0xFFFFFFFF, 8, 8)
            w.leave(OFFSET + last, region)
            self.clock[rank] = last


def write(out, example):
    with otf2.writer.open(out, timer_resolution=1000) as trace:
        ranks = {"late_sender": 2, "late_receiver": 2, "nxn": 3, "barrier": 4}.get(example, 3)
        job = Job(trace, ranks, extra_thread=example == "barrier")
        if example == "late_sender":
            job.compute(0, "work", 5)
            job.message(0, "ls.c:10", 1, "ls.c:20")
        elif example == "late_receiver":
            job.compute(1, "work", 5)
            job.message(0, "lr.c:10", 1, "lr.c:20", synchronous=True)
        elif example == "nxn":
            for rank in range(3):
                job.compute(rank, "work", 8 if rank == 1 else 2)
            job.collective("MPI_Allreduce", "nxn.c:30", CollectiveOp.ALLREDUCE)
        elif example == "barrier":
            omp = trace.definitions.region("!$omp parallel", paradigm=Paradigm.OPENMP,
                                           region_role=RegionRole.PARALLEL)
            thread = trace.event_writer_from_location(job.thread)
            thread.enter(OFFSET, omp)
            thread.leave(OFFSET + 4, omp)
            for rank in range(4):
                job.compute(rank, "work", 8 if rank == 3 else 4)
            temperature = trace.definitions.metric("temperature", unit="C")
            job.writers[0].metric(OFFSET + 4, temperature, 42.0)
            job.collective("MPI_Barrier", "b.c:12", CollectiveOp.BARRIER)
        elif example == "figure2":
            a, b, c = 0, 1, 2
            job.compute(a, "comp", 4)
            job.compute(b, "comp", 2)
            job.compute(c, "comp", 2)
            job.message(a, "S1", b, "R1")
            job.message(b, "S2", c, "R2")
        elif example == "figure3":
            a, b, c = 0, 1, 2
            job.compute(a, "f", 2)
            job.compute(a, "g", 3)
            job.compute(b, "f", 1)
            job.compute(b, "h", 1)
            job.message(a, "S3", b, "R3")
            job.compute(b, "g", 1)
            job.compute(c, "f", 2)
            job.compute(c, "h", 1)
            job.compute(c, "g", 2)
            job.message(b, "S4", c, "R4")
        else:
            sys.exit("unknown example " + example)


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2])

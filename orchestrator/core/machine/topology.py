"""The machine model: nodes, sockets, physical cores and their hardware threads, NUMA nodes, memory.

Pure data. Detection from Linux lives in `orchestrator.io.detect`; this module builds topologies from the
two file forms and answers the questions placement asks.

Compact form (one node type and a count)::

    nodes: 1
    sockets: 2
    cores_per_socket: 28
    threads_per_core: 2
    memory_gib: 192          # per node
    cpus:                    # optional: per socket, its cores; a core is a CPU id or a list of siblings
      - [0]
      - [1]

Detailed form (what `orch topology --json` prints, so a machine can be described where it stands and
planned for elsewhere): ``nodes`` is a list of node mappings, see `DetailedTopology` and `Node.to_dict`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from orchestrator.core.json.schema import MISSING, InvalidInput, Problem, load, opt, to_plain
from orchestrator.core.json.values import JsonReadable
from orchestrator.core.machine.isa import FILE, FLAGS, ISA_FEATURES, PROBE, CpuIsa

MIB_PER_GIB = 1024
BYTES_PER_MIB = 2**20
# Limits on what a topology may describe, so that an absurd file is refused at once instead of planning for
# minutes. The largest CPU cluster (Fugaku) has 158,976 nodes; Linux's own CPU limit (NR_CPUS) is at most 8,192.
MAX_NODES = 200_000
MAX_CPUS_PER_NODE = 8_192


def cpu_ranges(cpus: Iterable[int]) -> str:
    """CPU ids as Linux writes a CPU list (numactl, taskset, /sys): sorted, runs collapsed.

    >>> cpu_ranges([8, 0, 1, 2, 3, 10, 11])
    '0-3,8,10-11'
    >>> cpu_ranges([])
    ''
    """
    out, ordered = [], sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True, slots=True)
class Core:
    """A physical core; `cpus` are its hardware threads' CPU ids, primary thread first."""

    cpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NumaNode:
    index: int
    cpus: tuple[int, ...]
    memory_mib: float


@dataclass(frozen=True, slots=True)
class Socket:
    index: int
    cores: tuple[Core, ...]

    def cpus(self, hyperthreads: bool) -> tuple[int, ...]:
        """Usable CPU ids in placement order.

        With hyperthreads, siblings are kept adjacent (core0.t0, core0.t1, core1.t0, ...) so that a
        contiguous slice of even length never splits a physical core between two ranks.
        """
        if hyperthreads:
            return tuple(cpu for core in self.cores for cpu in core.cpus)
        return tuple(core.cpus[0] for core in self.cores)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    sockets: tuple[Socket, ...]
    numa_nodes: tuple[NumaNode, ...]
    memory_mib: float
    notes: tuple[str, ...] = ()
    isa: CpuIsa | None = None    # what the CPU computes natively (detected, or stated by a topology file)

    @property
    def threads_per_core(self) -> int:
        return max((len(c.cpus) for s in self.sockets for c in s.cores), default=1)

    def usable_cores(self, hyperthreads: bool) -> int:
        return sum(len(s.cpus(hyperthreads)) for s in self.sockets)

    def numa_of_cpus(self, cpus: tuple[int, ...]) -> tuple[int, ...]:
        """NUMA nodes holding any of `cpus`, sorted (one for a rank inside one NUMA domain)."""
        wanted = set(cpus)
        return tuple(sorted(n.index for n in self.numa_nodes if wanted & set(n.cpus)))

    def to_dict(self) -> dict[str, JsonReadable]:
        return {
            "name": self.name,
            "memory_mib": self.memory_mib,
            "sockets": [[list(c.cpus) for c in s.cores] for s in self.sockets],
            "numa_nodes": [{"index": n.index, "cpus": list(n.cpus), "memory_mib": n.memory_mib}
                           for n in self.numa_nodes],
            "notes": list(self.notes),
            **({"isa": self.isa.to_dict()} if self.isa is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes that are identical but for their names: what planning asks of one answers for all of them.

    A compact topology of N nodes is one group, so planning costs the same for 4 nodes or 10,000."""

    node: Node                                    # the first node of the group
    indices: tuple[int, ...]                      # ascending indices into Topology.nodes
    socket_cpus: tuple[tuple[int, ...], ...]      # per socket, usable CPUs without hyperthreads
    socket_cpus_ht: tuple[tuple[int, ...], ...]   # per socket, usable CPUs with hyperthreads
    cpu_numa: dict[int, tuple[int, ...]] = field(compare=False, repr=False)  # CPU id: the NUMA nodes holding it

    @staticmethod
    def of(node: Node, indices: tuple[int, ...]) -> NodeGroup:
        cpu_numa: dict[int, tuple[int, ...]] = {}
        for numa in node.numa_nodes:
            for cpu in numa.cpus:
                cpu_numa[cpu] = cpu_numa.get(cpu, ()) + (numa.index,)
        return NodeGroup(node, indices, tuple(s.cpus(False) for s in node.sockets),
                         tuple(s.cpus(True) for s in node.sockets), cpu_numa)

    @property
    def count(self) -> int:
        return len(self.indices)

    def cpus(self, hyperthreads: bool) -> tuple[tuple[int, ...], ...]:
        return self.socket_cpus_ht if hyperthreads else self.socket_cpus

    def socket_sizes(self, hyperthreads: bool) -> tuple[int, ...]:
        return tuple(len(c) for c in self.cpus(hyperthreads))

    def numa_of_cpus(self, cpus: tuple[int, ...]) -> tuple[int, ...]:
        """`Node.numa_of_cpus` from a lookup table instead of set operations on every NUMA node."""
        return tuple(sorted({index for cpu in cpus for index in self.cpu_numa.get(cpu, ())}))


def group_nodes(nodes: tuple[Node, ...]) -> tuple[NodeGroup, ...]:
    """Nodes grouped by shape (sockets, NUMA nodes, memory), groups ordered by their first node.

    Nodes built from one compact description share their socket objects, so they are grouped by identity
    first; only one node per identity group is compared by value (which costs its CPU count)."""
    by_identity: dict[tuple[int, int, float], list[int]] = {}
    for i, node in enumerate(nodes):
        by_identity.setdefault((id(node.sockets), id(node.numa_nodes), node.memory_mib), []).append(i)
    by_value: dict[tuple[tuple[Socket, ...], tuple[NumaNode, ...], float], list[int]] = {}
    for members in by_identity.values():
        first = nodes[members[0]]
        by_value.setdefault((first.sockets, first.numa_nodes, first.memory_mib), []).extend(members)
    groups = [sorted(members) for members in by_value.values()]
    return tuple(NodeGroup.of(nodes[m[0]], tuple(m)) for m in sorted(groups, key=lambda m: m[0]))


@dataclass(frozen=True, slots=True)
class NodeLink:
    """The link between nodes as a topology file states it: each node's bandwidth (one way) and the one-way
    latency between two nodes (None where not stated)."""

    bandwidth_bits_per_s: float
    latency_s: float | None = None
    # The nodes are network namespaces of one machine (`orch cluster up`): their ranks share its caches and memory
    # bandwidth, so a rank computes as the layout's ranks all on one node do, not as a rank alone on its node.
    shared_host: bool = False

    def words(self) -> str:
        """
        >>> NodeLink(25e9, 2e-6).words(), NodeLink(2e8, shared_host=True).words()
        ('25 Gbit/s, latency 2 µs', '0.2 Gbit/s, nodes emulated on one host')
        """
        latency = f", latency {self.latency_s * 1e6:g} µs" if self.latency_s is not None else ""
        host = ", nodes emulated on one host" if self.shared_host else ""
        return f"{self.bandwidth_bits_per_s / 1e9:g} Gbit/s{latency}{host}"

    def to_dict(self) -> dict[str, float | bool]:
        """As a topology file states the link (`NetworkSpec`, read back by `node_link`), what it does not state left
        out: no latency, or separate hosts."""
        stated = to_plain(NetworkSpec(bandwidth_gbit_per_s=self.bandwidth_bits_per_s / 1e9,
                                      latency_us=None if self.latency_s is None else self.latency_s * 1e6,
                                      shared_host=self.shared_host))
        return {key: value for key, value in stated.items() if value is not None and value is not False}


@dataclass(frozen=True, slots=True)
class Topology:
    nodes: tuple[Node, ...]
    source: str = ""
    link: NodeLink | None = None      # the link between nodes, where the description states it
    groups: tuple[NodeGroup, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", group_nodes(self.nodes))

    def usable_cores(self, hyperthreads: bool) -> int:
        return sum(g.count * sum(g.socket_sizes(hyperthreads)) for g in self.groups)

    def largest_socket(self, hyperthreads: bool) -> int:
        """Usable CPUs of the largest socket: no rank can have more cores than this."""
        return max(max(g.socket_sizes(hyperthreads)) for g in self.groups)

    def describe(self) -> str:
        """One line, e.g. '1 node × 2 sockets × 28 cores × 2 threads, 192 GiB/node'."""
        shapes = sorted({(len(n.sockets), max((len(s.cores) for s in n.sockets), default=0),
                          n.threads_per_core, round(n.memory_mib / MIB_PER_GIB, 1))
                         for n in (g.node for g in self.groups)})
        parts = [f"{s} socket(s) × {c} cores × {t} thread(s), {m:g} GiB" for s, c, t, m in shapes]
        return f"{len(self.nodes)} node(s): " + "; ".join(parts)

    def to_dict(self) -> dict[str, JsonReadable]:
        network = {"network": self.link.to_dict()} if self.link is not None else {}
        return {"source": self.source, "nodes": [n.to_dict() for n in self.nodes], **network}

    def cpu_ids(self) -> frozenset[int]:
        """Every CPU id any node names (hyperthreads included)."""
        return frozenset(cpu for g in self.groups for socket in g.node.sockets for core in socket.cores
                         for cpu in core.cpus)

    def with_unstated_isa(self, isas: Sequence[CpuIsa | None], source: str | None = None) -> Topology:
        """Each node's CPU verdict where the description states none, from `isas` (one per node, in order):
        the machine the nodes run on decides what they compute natively, a file only the layout. One rule
        for `orch sweep` (the Ray nodes' verdicts) and `orch plan` (this machine's, when the file describes
        it)."""
        nodes = tuple(node if node.isa is not None or isa is None else replace(node, isa=isa)
                      for node, isa in zip(self.nodes, isas))
        return Topology(nodes + self.nodes[len(nodes):], self.source if source is None else source, self.link)


@dataclass(frozen=True, kw_only=True, slots=True)
class IsaSpec:
    """A node's CPU as a topology file states it: for planning a machine you do not have (`orch topology --json`
    on that machine writes it, probe figures included)."""

    features: tuple[str, ...] = opt((), f"ISA features the CPU has, of: {', '.join(ISA_FEATURES)}")
    bf16_native: bool | None = opt(None, "whether the CPU computes bf16 natively (default: from the features: "
                                         "avx512_bf16 or amx_bf16)")
    fp32_gflops: float | None = opt(None, "one core's GEMM rate in fp32 (orch topology's probe)", exclusive_minimum=0)
    bf16_gflops: float | None = opt(None, "one core's GEMM rate in bf16 (orch topology's probe)", exclusive_minimum=0)
    torch_capability: str | None = opt(None, "the kernels ATen dispatches to there (AVX512, AVX2, DEFAULT)")
    isa_cap: str | None = opt(None, "ONEDNN_MAX_CPU_ISA in force there, if any")
    source: str = opt(FILE, f"where the verdict came from: {PROBE}, {FLAGS} or {FILE}")
    cpu_model: str = opt("", "the CPU's model name")
    verdict: str = opt("", "ignored on reading: the verdict in words, as orch topology --json writes it")
    peak_fp32_gflops_per_core: float | None = opt(
        None, "orch predict's CPU what-if: one core's fp32 GEMM peak (a peak sweep's 1-thread figure, or a "
              "datasheet's)", exclusive_minimum=0)
    peak_bf16_gflops_per_core: float | None = opt(None, "the same in bf16", exclusive_minimum=0)
    triad_gb_per_s_per_core: float | None = opt(
        None, "orch predict's CPU what-if: one core's STREAM-triad memory bandwidth in GB/s", exclusive_minimum=0)

    def __post_init__(self) -> None:
        unknown = [f for f in self.features if f not in ISA_FEATURES]
        if unknown:
            raise ValueError(f"isa.features: unknown {unknown}; known: {', '.join(ISA_FEATURES)}")

    def cpu_isa(self) -> CpuIsa:
        probed = self.source == PROBE and self.fp32_gflops is not None and self.bf16_gflops is not None
        # A verdict that was derived (from a probe or from flags) is derived again on reading, not taken as stated
        stated = None if probed or self.source == FLAGS else self.bf16_native
        source = PROBE if probed else FILE if stated is not None else FLAGS
        return CpuIsa(features=self.features, torch_capability=self.torch_capability, isa_cap=self.isa_cap,
                      fp32_gflops=self.fp32_gflops, bf16_gflops=self.bf16_gflops, native_bf16=stated,
                      source=source, cpu_model=self.cpu_model,
                      peak_fp32_gflops_per_core=self.peak_fp32_gflops_per_core,
                      peak_bf16_gflops_per_core=self.peak_bf16_gflops_per_core,
                      triad_gb_per_s_per_core=self.triad_gb_per_s_per_core)


@dataclass(frozen=True, kw_only=True, slots=True)
class NetworkSpec:
    """The link between nodes, as a topology file states it (as `isa` states a CPU's peak): for `orch predict`, which
    costs the node axis's all-reduce from it where no cross-node calibration exists."""

    bandwidth_gbit_per_s: float = opt(MISSING, "each node's link, one way, in Gbit/s (25 for 25 GbE)",
                                      exclusive_minimum=0)
    latency_us: float | None = opt(None, "one-way latency between two nodes in µs (default: not stated)", minimum=0)
    shared_host: bool = opt(False, "the nodes are network namespaces of one machine, as `orch cluster up` makes "
                                   "them: their ranks share its caches and memory bandwidth (default false)")

    def node_link(self) -> NodeLink:
        return NodeLink(self.bandwidth_gbit_per_s * 1e9, None if self.latency_us is None else self.latency_us * 1e-6,
                        self.shared_host)


NETWORK_HELP = ("the link between nodes (bandwidth_gbit_per_s, latency_us, shared_host): orch predict costs the "
                "node axis from it")


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactTopology:
    """The compact file form: one node type repeated `nodes` times."""

    name: str = opt("", "a label for reports")
    nodes: int = opt(1, f"number of identical nodes (at most {MAX_NODES:,})", minimum=1,
                     maximum=MAX_NODES)
    sockets: int = opt(MISSING, "sockets per node", minimum=1)
    cores_per_socket: int = opt(MISSING, "physical cores per socket", minimum=1)
    threads_per_core: int = opt(1, "hardware threads per core (2 with SMT/hyper-threading)", minimum=1)
    memory_gib: float = opt(MISSING, "memory per node in GiB", exclusive_minimum=0)
    numa_per_socket: int = opt(1, "NUMA nodes per socket (sub-NUMA clustering splits a socket's cores)",
                               minimum=1)
    cpus: tuple[tuple[int | tuple[int, ...], ...], ...] | None = opt(
        None, "explicit CPU ids: per socket, a list of cores, each a CPU id or a list of sibling CPU ids")
    isa: IsaSpec | None = opt(None, "what the CPU computes natively (features, bf16 verdict): decides precision auto")
    network: NetworkSpec | None = opt(None, NETWORK_HELP)

    def __post_init__(self) -> None:
        errors = []
        cpus = self.sockets * self.cores_per_socket * self.threads_per_core
        if cpus > MAX_CPUS_PER_NODE:
            errors.append(f"sockets({self.sockets}) × cores_per_socket({self.cores_per_socket}) × threads_per_core"
                          f"({self.threads_per_core}) = {cpus:,} CPUs per node > {MAX_CPUS_PER_NODE:,}, the most "
                          "Linux supports (NR_CPUS)")
            raise ValueError("\n".join(errors))  # the checks below would walk every one of those CPUs
        if self.cores_per_socket % self.numa_per_socket:
            errors.append(f"numa_per_socket({self.numa_per_socket}) must divide "
                          f"cores_per_socket({self.cores_per_socket})")
        if self.cpus is not None:
            errors += _check_explicit_cpus(self)
        if errors:
            raise ValueError("\n".join(errors))


def _core_cpus(core: int | tuple[int, ...]) -> tuple[int, ...]:
    return (core,) if isinstance(core, int) else tuple(core)


def _check_explicit_cpus(spec: CompactTopology) -> list[str]:
    errors = []
    cpus = spec.cpus or ()
    if len(cpus) != spec.sockets:
        errors.append(f"cpus: lists {len(cpus)} socket(s) but sockets is {spec.sockets}")
    seen: set[int] = set()
    for s, cores in enumerate(cpus):
        if len(cores) != spec.cores_per_socket:
            errors.append(f"cpus[{s}]: {len(cores)} core(s) but cores_per_socket is {spec.cores_per_socket}")
        for c, core in enumerate(cores):
            ids = _core_cpus(core)
            if len(ids) != spec.threads_per_core:
                errors.append(f"cpus[{s}][{c}]: {len(ids)} CPU id(s) but threads_per_core is "
                              f"{spec.threads_per_core}")
            for cpu in ids:
                if cpu < 0:
                    errors.append(f"cpus[{s}][{c}]: CPU id {cpu} is negative")
                if cpu in seen:
                    errors.append(f"cpus[{s}][{c}]: CPU id {cpu} appears twice")
                seen.add(cpu)
    return errors


def build_compact(spec: CompactTopology, source: str = "") -> Topology:
    """Expand the compact form. Without explicit CPUs, ids follow Linux's usual Intel numbering:
    the first thread of every core across all sockets first, then the siblings."""
    total_cores = spec.sockets * spec.cores_per_socket
    sockets = []
    for s in range(spec.sockets):
        if spec.cpus is not None:
            cores = tuple(Core(_core_cpus(c)) for c in spec.cpus[s])
        else:
            cores = tuple(Core(tuple(t * total_cores + s * spec.cores_per_socket + c
                                     for t in range(spec.threads_per_core)))
                          for c in range(spec.cores_per_socket))
        sockets.append(Socket(s, cores))
    numa: list[NumaNode] = []
    per_numa = spec.cores_per_socket // spec.numa_per_socket
    numa_mem = spec.memory_gib * MIB_PER_GIB / (spec.sockets * spec.numa_per_socket)
    for sock in sockets:
        for k in range(spec.numa_per_socket):
            cores = sock.cores[k * per_numa:(k + 1) * per_numa]
            numa.append(NumaNode(len(numa), tuple(sorted(cpu for c in cores for cpu in c.cpus)), numa_mem))
    name = spec.name or "node"
    shared_sockets, shared_numa = tuple(sockets), tuple(numa)  # one object for all nodes: see group_nodes
    isa = spec.isa.cpu_isa() if spec.isa is not None else None
    nodes = tuple(Node(f"{name}{i}" if spec.nodes > 1 else name, shared_sockets, shared_numa,
                       spec.memory_gib * MIB_PER_GIB, isa=isa) for i in range(spec.nodes))
    return Topology(nodes, source, spec.network.node_link() if spec.network is not None else None)


@dataclass(frozen=True, kw_only=True, slots=True)
class DetailedNuma:
    """One NUMA node of a detailed node, as `Node.to_dict` writes it."""

    index: int | None = opt(None, "the NUMA node's number (its position in the list when not given)",
                            minimum=0)
    cpus: tuple[int, ...] = opt(MISSING, "the CPU ids of this NUMA node", minimum=0)
    memory_mib: float = opt(0.0, "memory of this NUMA node in MiB", minimum=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class DetailedNode:
    """One node of the detailed file form, as `Node.to_dict` writes it."""

    name: str | None = opt(None, "the node's name (its key path, e.g. nodes[0], when not given)")
    memory_mib: float = opt(MISSING, "memory of the node in MiB", exclusive_minimum=0)
    sockets: tuple[tuple[int | tuple[int, ...], ...], ...] = opt(
        MISSING, "per socket, a list of cores, each a CPU id or a list of sibling CPU ids", minimum=0)
    # null (an empty `numa_nodes:` in YAML) means not given, as it did before these fields had a schema
    numa_nodes: tuple[DetailedNuma, ...] | None = opt(None, "NUMA nodes (one per socket when not given)")
    notes: tuple[str, ...] | None = opt(None, "what detection could not see, for the report")
    isa: IsaSpec | None = opt(None, "what the CPU computes natively (features, bf16 verdict): decides precision auto")

    def __post_init__(self) -> None:
        if problems := _node_cpu_problems(self):
            raise InvalidInput("node", problems)


@dataclass(frozen=True, kw_only=True, slots=True)
class DetailedTopology:
    """The detailed file form: what `orch topology --json` prints."""

    nodes: tuple[DetailedNode, ...] = opt(MISSING, f"the nodes, each described in full (at most {MAX_NODES:,})")
    source: str = opt("", "where the description came from")
    network: NetworkSpec | None = opt(None, NETWORK_HELP)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise InvalidInput("topology", [Problem("nodes", "must list at least one node")])


def _node_cpu_problems(node: DetailedNode) -> list[Problem]:
    """What the schema cannot say about a node's CPUs: at least one socket, every core with a CPU id,
    no CPU id twice, at most MAX_CPUS_PER_NODE, and NUMA CPUs only from the node's sockets.

    Key paths are relative to the node: the loader puts them under the node's own path."""
    if not node.sockets:
        return [Problem("sockets", "must list at least one socket (a list of cores)")]
    cpu_count = sum(len(_core_cpus(core)) for cores in node.sockets for core in cores)
    if cpu_count > MAX_CPUS_PER_NODE:  # refused before the checks below walk every one of them
        return [Problem("sockets", f"lists {cpu_count:,} CPUs, more than Linux supports per node "
                                   f"(NR_CPUS, {MAX_CPUS_PER_NODE:,})")]
    problems: list[Problem] = []
    seen: set[int] = set()
    for s, cores in enumerate(node.sockets):
        for c, core in enumerate(cores):
            ids = set(_core_cpus(core))
            if not ids:
                problems.append(Problem(f"sockets[{s}][{c}]", "must list at least one CPU id"))
            if seen & ids:
                problems.append(Problem(f"sockets[{s}][{c}]", f"CPU id(s) {sorted(seen & ids)} appear twice"))
            seen |= ids
    for k, numa in enumerate(node.numa_nodes or ()):
        if stray := set(numa.cpus) - seen:
            problems.append(Problem(f"numa_nodes[{k}].cpus", f"CPU id(s) {sorted(stray)} are in no socket "
                                                             "of this node"))
    return problems


def _build_node(node: DetailedNode, path: str) -> Node:
    """A `Node` from a checked detailed node; one NUMA node per socket, sharing the memory, when none is given."""
    sockets = tuple(Socket(s, tuple(Core(_core_cpus(core)) for core in cores))
                    for s, cores in enumerate(node.sockets))
    numa = tuple(NumaNode(k if n.index is None else n.index, n.cpus, n.memory_mib)
                 for k, n in enumerate(node.numa_nodes or ()))
    if not numa:
        share_mib = node.memory_mib / len(sockets)
        numa = tuple(NumaNode(s.index, tuple(sorted(s.cpus(True))), share_mib) for s in sockets)
    return Node(path if node.name is None else node.name, sockets, numa, node.memory_mib, node.notes or (),
                node.isa.cpu_isa() if node.isa is not None else None)


def _detailed_topology(data: Mapping[str, object], node_count: int,
                       source: str) -> tuple[Topology | None, list[Problem]]:
    if node_count > MAX_NODES:  # refused before loading them, which would take minutes
        return None, [Problem("nodes", f"lists {node_count:,} nodes, more than orch plans for "
                                       f"({MAX_NODES:,})")]
    spec, problems = load(DetailedTopology, data)
    if spec is None:
        return None, problems
    nodes = tuple(_build_node(node, f"nodes[{i}]") for i, node in enumerate(spec.nodes))
    return Topology(nodes, source or spec.source, spec.network.node_link() if spec.network is not None else None), []


def topology_from_data(data: object, source: str = "") -> tuple[Topology | None, list[Problem]]:
    """Either file form; returns (topology, problems)."""
    if not isinstance(data, dict):
        return None, [Problem("", f"a topology must be a mapping, got {type(data).__name__}")]
    nodes = data.get("nodes")
    if isinstance(nodes, list):
        return _detailed_topology(data, len(nodes), source)
    spec, problems = load(CompactTopology, data)
    if spec is None:
        return None, problems
    return build_compact(spec, source), []

"""The candidates a search measures: one small, immutable description per way of running an
operator's kernel on one matrix.

A :class:`Candidate` names a layout (``"csr"``: the row-tiled CSR kernel of ``sparsetir.ops``;
``"split"``: the same kernel over rows cut into pieces of at most a tile's share of the
nonzeros, ``ops.split``; ``"hyb"``: column partitions x ELL buckets, ``ops.hyb``) and its
schedule's parameters: the register tile of SpMM's feature loop (``lanes``), how many nonzeros
ahead the loop over a row prefetches the rows it gathers (``prefetch``), the row tiles per
thread (tiles are claimed one at a time by the task pool: more tiles balance better and cost a
little more to claim), and hyb's partitions and bucket widths. :func:`space` lists the
candidates of one kernel and feature size; :func:`default` is what an untuned call runs.
Candidates are data: the cost model (``cost_model``) and the measurement (``measure``) read
them, and a record on disk (``records``) stores one as JSON, read back only when it is one of
today's :func:`space`.

Example
-------
>>> from sparsetir.tune.candidates import space, Candidate
>>> Candidate("csr", prefetch=16, lanes=32, tiles_per_thread=64).describe()
'csr lanes=32 prefetch=16 tiles/thread=64'
>>> sorted({c.layout for c in space("sddmm", 64)}), sorted({c.layout for c in space("spmm", 64)})
(['csr', 'split'], ['csr', 'hyb', 'split'])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import SparseTIRValueError
from ..schedule.operators import prefetch_distance, spmm_lanes

KERNELS = ("spmm", "spmm_unweighted", "sddmm")
"""The kernels of ``sparsetir.ops`` a search chooses for (by ``ops.kernels`` name)."""

PREFETCHES = (0, 8, 16, 32)
TILES_PER_THREAD = (8, 64)
HYB_WIDTHS = ((1, 2, 4, 8, 16, 32, 64, 128), (4, 16, 64, 256))
HYB_PARTS = (1, 2)
HYB_TILES_PER_THREAD = 32


@dataclass(frozen=True)
class Candidate:
    """One way to run a kernel (see the module docstring). ``lanes`` 0 stands for no register
    tile (a feature size no tile divides); ``parts`` and ``widths`` are hyb's only."""
    layout: str
    prefetch: int = 0
    lanes: int = 0
    tiles_per_thread: int = 8
    parts: int = 1
    widths: tuple = field(default=())

    def describe(self) -> str:
        """A short readable form, for reports."""
        text = f"{self.layout} lanes={self.lanes} prefetch={self.prefetch} " \
               f"tiles/thread={self.tiles_per_thread}"
        if self.layout == "hyb":
            text += f" parts={self.parts} widths={'/'.join(map(str, self.widths))}"
        return text

    def to_json(self) -> dict:
        return {**asdict(self), "widths": list(self.widths)}

    @classmethod
    def from_json(cls, data, kernel: str, feat_size: int) -> "Candidate | None":
        """The candidate ``data`` describes when it is one of ``space(kernel, feat_size)``,
        else None (a record from another version, or altered, is not trusted)."""
        try:
            candidate = cls(**{**data, "widths": tuple(data["widths"])})
        except (TypeError, KeyError):
            return None
        numbers = [candidate.prefetch, candidate.lanes, candidate.tiles_per_thread,
                   candidate.parts, *candidate.widths]
        if type(candidate.layout) is not str or any(type(n) is not int for n in numbers):
            return None                 # 32.0 == 32 would pass the test below, and fail later
        return candidate if candidate in space(kernel, feat_size) else None


def space(kernel: str, feat_size: int) -> list:
    """Every candidate for ``kernel`` (one of ``KERNELS``) at ``feat_size`` features: CSR and
    its nonzero split with each register tile that divides the feature size (SpMM), each
    prefetch distance and tile count; for weighted SpMM, hyb with 1 or 2 column partitions and
    two sets of widths."""
    if kernel not in KERNELS:
        raise SparseTIRValueError(f"no search for kernel {kernel!r}; kernels: "
                                  f"{', '.join(KERNELS)}")
    lanes = _lane_choices(feat_size) if kernel != "sddmm" else (0,)
    found = [Candidate(layout, prefetch, lane, tiles) for layout in ("csr", "split")
             for lane in lanes for prefetch in PREFETCHES for tiles in TILES_PER_THREAD]
    if kernel == "spmm":
        found += [Candidate("hyb", prefetch, _hyb_lanes(feat_size), HYB_TILES_PER_THREAD,
                            parts, widths)
                  for parts in HYB_PARTS for widths in HYB_WIDTHS for prefetch in (0, 16)]
    return found


def default(kernel: str, feat_size: int, gathered_rows: int) -> Candidate:
    """What an untuned call runs: CSR, the widest register tile, 8 tiles per thread, the
    prefetch distance of ``schedule.operators.prefetch_distance`` (for a gathered operand of
    ``gathered_rows`` rows)."""
    lanes = _lane_choices(feat_size)[-1] if kernel != "sddmm" else 0
    return Candidate("csr", prefetch_distance(gathered_rows, feat_size), lanes, 8)


def _lane_choices(feat_size: int) -> tuple:
    """Register tiles that divide ``feat_size``, narrowest first, the default last; (0,) when
    none does (one scalar loop)."""
    widest = spmm_lanes(feat_size)
    if widest == 1:
        return (0,)
    return tuple(lanes for lanes in (16, 32, 64, 128) if lanes <= widest and feat_size % lanes == 0) \
        or (widest,)


def _hyb_lanes(feat_size: int) -> int:
    """The register tile hyb's schedule takes (``ops.hyb``: ``spmm_lanes``); 0 for none."""
    widest = spmm_lanes(feat_size)
    return 0 if widest == 1 else widest

"""The per-matrix search: for each kernel and feature size, the candidate that runs fastest on
this matrix and machine, measured, and kept with the matrix and on disk.

For one (kernel, feature size): a record stored by an earlier search for this pattern and
machine (``records``) is checked against scipy and used without measuring. Otherwise the cost
model (``cost_model``) orders every candidate (``candidates.space``), and the default
(``candidates.default``, what an untuned call runs) and the model's best few are built, checked
against scipy on NaN-filled outputs (``measure.Trial``: a wrong one is dropped) and timed as
whole calls, the default first, within the time budget (a candidate whose call fails, checked or
timed, is dropped); the fastest is timed again in calls alternating with the default's and
chosen when it is at least ``MARGIN`` faster there (else the default stays), bound to the matrix
(``SparseMatrix.tuned``, which the operators' calls use) and recorded. Compile time (building
kernels) and search time (checking and timing) are reported apart.

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = SparseMatrix(A)

A budget this small times the default alone (a real search takes seconds, ``budget_s=20``):

>>> report = tune(M, [16], ops=("spmm", "sddmm"), budget_s=0.001, use_records=False)
>>> print(report)                    # one row per kernel and feature size
kernel feat choice ms default compile s search s
spmm 16 csr lanes=16 prefetch=0 tiles/thread=8 ...
spmm_unweighted 16 csr lanes=16 prefetch=0 tiles/thread=8 ...
sddmm 16 csr lanes=0 prefetch=0 tiles/thread=8 ...
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ops.matrix import SparseMatrix
from ..runtime.threads import thread_count
from . import records
from .candidates import KERNELS, default, space
from .cost_model import MatrixStats, ranked
from .measure import CandidateFailed, Trial, bind, time_calls, time_pair

MEASURED = 4
"""Candidates measured per (kernel, feature size) besides the default, the model's best first."""

MARGIN = 0.02
"""How much faster than the default the best candidate must be, timed in calls alternating
with the default's (``measure.time_pair``), to replace it: timed one after the other, a
candidate can win by a machine that slowed down while the default ran."""

OPERATORS = {"spmm": ("spmm", "spmm_unweighted"), "sddmm": ("sddmm",)}
"""The kernels behind each operator name ``tune`` takes (SpMM has a weighted and an unweighted
kernel)."""


@dataclass
class Outcome:
    """What the search found for one kernel and feature size: ``measured`` holds each
    candidate's seconds timed on its own, ``paired`` the default's and the fastest one's timed
    in alternation (``measure.time_pair``: what decides), ``failed`` why a candidate was
    dropped; ``chosen_s`` and ``default_s`` are the deciding times."""
    kernel: str
    feat_size: int
    choice: str
    chosen_s: float | None = None
    default_s: float | None = None
    from_record: bool = False
    compile_s: float = 0.0
    search_s: float = 0.0
    measured: dict = field(default_factory=dict)
    paired: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        """The default's time over the choice's (1.0: the default was kept)."""
        if self.chosen_s and self.default_s:
            return self.default_s / self.chosen_s
        return None


@dataclass
class TuneReport:
    """Every :class:`Outcome` of one ``tune`` call and the ``SparseMatrix`` whose calls use the
    choices (the one given, or the one made from a scipy or torch matrix); ``str()`` gives a
    table."""
    outcomes: list
    matrix: SparseMatrix = None

    def __str__(self) -> str:
        lines = [f"{'kernel':<16}{'feat':>5}  {'choice':<58}{'ms':>8}{'default':>9}"
                 f"{'compile s':>10}{'search s':>9}"]
        for o in self.outcomes:
            chosen = "record" if o.from_record else "-" if o.chosen_s is None \
                else f"{o.chosen_s * 1e3:.3f}"
            base = "" if o.default_s is None else f"{o.default_s * 1e3:.3f}"
            lines.append(f"{o.kernel:<16}{o.feat_size:>5}  {o.choice:<58}{chosen:>8}"
                         f"{base:>9}{o.compile_s:>10.1f}{o.search_s:>9.2f}")
        return "\n".join(lines)


def tune(matrix, feat_sizes, ops=("spmm", "sddmm"), budget_s: float = 10.0,
         use_records: bool = True, kernels=None) -> TuneReport:
    """Choose, for ``matrix`` on this machine and thread count, the fastest layout and
    schedule of each operator in ``ops`` (``"spmm"``: weighted and unweighted; ``"sddmm"``) at
    each feature size in ``feat_sizes``, and make ``matrix``'s calls use it.

    ``matrix`` is a float32 ``SparseMatrix`` (its choices are kept in ``matrix.tuned``;
    anything else is wrapped in a new one, the report's ``matrix``). ``feat_sizes``: one size
    or several; ``ops``: one name or several. ``budget_s`` is shared by the kernels and feature
    sizes; each one's share counts from before its operands are made, and compiles made
    meanwhile count in it (once per kernel: they are cached on disk), but the default is
    always measured, so a first search on a new machine can take longer.
    ``use_records=False`` searches even where a record exists (and replaces it). ``kernels``:
    kernel names (``candidates.KERNELS``) instead of ``ops``.

    Example
    -------
    >>> import scipy.sparse
    >>> import sparsetir.ops as ops
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32,
    ...                         random_state=0)
    >>> M = ops.SparseMatrix(A)
    >>> report = ops.tune(M, [16], ops=("spmm",), budget_s=0.001, use_records=False)
    >>> [(o.kernel, o.feat_size) for o in report.outcomes]
    [('spmm', 16), ('spmm_unweighted', 16)]
    >>> X = np.ones((5, 16), np.float32)
    >>> np.allclose(ops.spmm(M, X), A @ X)      # X with 16 features: the chosen kernel runs
    True
    """
    if not isinstance(matrix, SparseMatrix):
        matrix = SparseMatrix(matrix, name="A")
    if matrix.dtype != np.float32:
        raise SparseTIRTypeError(f"tune searches among float32 kernels; this matrix is "
                                 f"{matrix.dtype} (its calls run the float64 kernels as they are)")
    if not (isinstance(budget_s, (int, float)) and math.isfinite(budget_s) and budget_s > 0):
        raise SparseTIRValueError(f"budget_s must be a positive number of seconds, got "
                                  f"{budget_s!r}")
    names = _one_or_many("kernels", kernels) if kernels is not None else [
        kernel for op in _one_or_many("ops", ops) for kernel in _kernels_of(op)]
    for kernel in names:                 # all named before any work (M.tuned unchanged)
        if kernel not in KERNELS:
            raise SparseTIRValueError(f"no search for kernel {kernel!r}; kernels: "
                                      f"{', '.join(KERNELS)}")
    feats = [_feature_size(f) for f in _one_or_many("feat_sizes", feat_sizes)]
    cases = list(dict.fromkeys((kernel, feat) for kernel in names for feat in feats))
    pattern = records.fingerprint(matrix)
    stats = MatrixStats.of(matrix)
    share = budget_s / max(len(cases), 1)
    outcomes = [_tune_one(matrix, kernel, feat, pattern, stats, share, use_records)
                for kernel, feat in cases]
    matrix.calls.clear()                 # calls prepared before bound the earlier kernels
    matrix.numpy_calls.clear()
    return TuneReport(outcomes, matrix)


def _one_or_many(name: str, value) -> list:
    """``value`` (the argument ``name``) as a list: a string or a number is one item."""
    if isinstance(value, (str, int, np.integer)):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise SparseTIRTypeError(f"{name} must be one item or a list of them, got "
                                 f"{type(value).__name__}") from None


def _kernels_of(op: str) -> tuple:
    if op not in OPERATORS:
        raise SparseTIRValueError(f"no search for operator {op!r}; operators: "
                                  f"{', '.join(OPERATORS)}")
    return OPERATORS[op]


def _feature_size(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SparseTIRValueError(f"feature sizes are positive integers, got {value!r}")
    return int(value)


def _tune_one(matrix, kernel: str, feat: int, pattern: str, stats, budget_s: float,
              use_records: bool) -> Outcome:
    """Search (or read the record of) one kernel and feature size; bind the choice."""
    key = records.record_key(pattern, kernel, feat)
    begun = time.perf_counter()
    trial = Trial(matrix, kernel, feat)
    trial_s = time.perf_counter() - begun         # search time: operands and scipy's result
    if use_records:
        recorded = records.load(key)
        if recorded is not None:
            started = time.perf_counter()
            try:
                bound = bind(recorded, matrix, kernel, feat)
                trial.check(bound)
            except Exception:  # noqa: BLE001  (a record that cannot be built or checked: search)
                bound = None
            if bound is not None:
                matrix.tuned[(kernel, feat)] = bound
                return Outcome(kernel, feat, recorded.describe(), from_record=True,
                               compile_s=time.perf_counter() - started, search_s=trial_s)
    base = default(kernel, feat, matrix.shape[1])      # X's rows (SpMM), Y's (SDDMM)
    order = [base] + [c for c in ranked(space(kernel, feat), kernel, feat, stats,
                                        thread_count()) if c != base][:MEASURED]
    outcome = Outcome(kernel, feat, base.describe(), search_s=trial_s)
    deadline = begun + budget_s
    best, best_s, best_bound, base_bound = None, float("inf"), None, None
    for candidate in order:
        if candidate is not base and time.perf_counter() > deadline:
            break
        started = time.perf_counter()
        try:
            bound = bind(candidate, matrix, kernel, feat)
        except Exception as err:  # noqa: BLE001  (a candidate that cannot be built is dropped)
            outcome.failed[candidate.describe()] = f"not built: {err}"
            continue
        compiled = time.perf_counter()
        outcome.compile_s += compiled - started
        try:
            trial.check(bound)
            seconds = time_calls(bound, trial.args, min(0.5, budget_s / (MEASURED + 1)))
        except CandidateFailed as err:
            outcome.failed[candidate.describe()] = str(err)
            continue
        except Exception as err:  # noqa: BLE001  (a call that fails while timed is dropped)
            outcome.failed[candidate.describe()] = f"failed while timed: {err}"
            continue
        finally:
            outcome.search_s += time.perf_counter() - compiled
        outcome.measured[candidate.describe()] = seconds
        if candidate is base:
            outcome.default_s, base_bound = seconds, bound
        if seconds < best_s:
            best, best_s, best_bound = candidate, seconds, bound
    if best is None:
        return outcome                   # nothing passed: the default path stays
    if best is not base and outcome.default_s is not None:
        best, best_s, best_bound = _confirmed(outcome, (base, base_bound), (best, best_bound),
                                              trial, min(0.5, budget_s / (MEASURED + 1)))
    matrix.tuned[(kernel, feat)] = best_bound
    outcome.choice, outcome.chosen_s = best.describe(), best_s
    records.store(key, best, outcome.measured, outcome.paired)
    return outcome


def _confirmed(outcome: Outcome, base: tuple, best: tuple, trial: Trial,
               budget_s: float) -> tuple:
    """``(candidate, seconds, bound)`` of the winner of the default ``base`` and the fastest
    candidate ``best`` (each ``(candidate, bound)``), timed in alternation: ``best`` when it
    is at least ``MARGIN`` faster there, else the default (also when the timing fails). The
    times go to ``outcome.paired``, ``default_s`` and the search time."""
    started = time.perf_counter()
    try:
        base_s, best_s = time_pair(base[1], best[1], trial.args, budget_s)
    except Exception as err:  # noqa: BLE001  (the default stays)
        outcome.failed[best[0].describe()] = f"failed while timed against the default: {err}"
        return base[0], outcome.default_s, base[1]
    finally:
        outcome.search_s += time.perf_counter() - started
    outcome.default_s = base_s
    outcome.paired = {base[0].describe(): base_s, best[0].describe(): best_s}
    if best_s > base_s * (1 - MARGIN):
        return base[0], base_s, base[1]
    return best[0], best_s, best[1]

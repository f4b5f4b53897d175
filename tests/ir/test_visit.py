"""Walk helpers over a Stage I body: every iteration, nested ones included, in one place."""

from kernel_zoo import CASES
from tvm import tirx

from sparsetir.ir import iterations, map_iterations, replace, tir_stmts

SOFTMAX = CASES["sparse_softmax"].func       # sparse_softmax holds row_max, exp_sum, normalize


def test_iterations_lists_outer_before_nested():
    assert [it.name for it in iterations(SOFTMAX.body)] == [
        "sparse_softmax", "row_max", "exp_sum", "normalize"]


def test_map_iterations_rebuilds_only_what_changed():
    body = map_iterations(SOFTMAX.body, lambda it: replace(it, name="sum")
                          if it.name == "exp_sum" else it)
    assert [it.name for it in iterations(body)] == ["sparse_softmax", "row_max", "sum",
                                                    "normalize"]
    outer, old = body[0], SOFTMAX.body[0]
    assert [new.same_as(o) for new, o in zip(outer.body, old.body)] == [True, False, True]
    assert map_iterations(SOFTMAX.body, lambda it: it)[0].same_as(old)


def test_map_iterations_sees_nested_results():
    seen = []

    def record(it):
        seen.append([inner.name for inner in it.body if hasattr(inner, "sp_iter_vars")])
        return replace(it, name=it.name.upper()) if not seen[-1] else it

    body = map_iterations(SOFTMAX.body, record)
    assert seen[-1] == ["ROW_MAX", "EXP_SUM", "NORMALIZE"]
    assert body[0].name == "sparse_softmax"


def test_tir_stmts_include_nested_bodies_and_inits():
    stmts = tir_stmts(SOFTMAX.body[0])
    assert stmts and all(isinstance(s, tirx.Stmt) for s in stmts)
    nested = [s for it in list(iterations(SOFTMAX.body))[1:]
              for s in list(it.body) + list(it.init or [])]
    assert len(stmts) == len(nested) + len([s for s in SOFTMAX.body[0].body
                                            if isinstance(s, tirx.Stmt)])

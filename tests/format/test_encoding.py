"""``sparsetir.format.Encoding``: MLIR's sparse encodings parsed, printed back, named, checked.

Every encoding of issue #26 (and of MLIR's ``roundtrip_encoding.mlir``) parses, prints in MLIR's
canonical form (written here by hand), and parses back to an equal encoding; bad text raises
``EncodingError`` at the column of the problem, saying what was expected.
"""

import numpy as np
import pytest

from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.format import Encoding, EncodingError, LevelType, Slice

W = "#sparse_tensor.encoding<{{ map = {} }}>"

# (text as written, the canonical text MLIR prints for it)
ROUND_TRIPS = [
    # MLIR's own tests end the entries with a ',' (block.mlir's NV_24): refused before
    ("#sparse_tensor.encoding<{\n  map = ( i, j ) ->\n  ( i : dense,\n    j floordiv 4 : dense,\n"
     "    j mod 4 : structured[2, 4]\n  ),\n}>",
     W.format("(d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4])")),
    ("map = (i) -> (i : dense), posWidth = 8,",
     "#sparse_tensor.encoding<{ map = (d0) -> (d0 : dense), posWidth = 8 }>"),
    # MLIR's verifier allows these (refused before)
    ("map = (d0) -> (d0 : compressed(nonunique))",
     W.format("(d0) -> (d0 : compressed(nonunique))")),
    ("map = (d0, d1) -> (d0 : compressed, d1 : singleton)",
     W.format("(d0, d1) -> (d0 : compressed, d1 : singleton)")),
    ("#sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed) }>",
     W.format("(d0) -> (d0 : compressed)")),
    ("#sparse_tensor.encoding<{\n  map = (d0, d1) -> (d0 : dense, d1 : compressed),\n"
     "  posWidth = 64,\n  crdWidth = 64\n}>",
     "#sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64,"
     " crdWidth = 64 }>"),
    ("map = {l0, l1} (d0 = l0, d1 = l1) -> (l0 = d0 : dense, l1 = d1 : compressed)",
     W.format("(d0, d1) -> (d0 : dense, d1 : compressed)")),
    ("map = (i, j) -> (j : dense, i : compressed), posWidth = 0, crdWidth = 0",
     W.format("(d0, d1) -> (d1 : dense, d0 : compressed)")),
    ("map = (i, j) -> (i : compressed, j : compressed)",
     W.format("(d0, d1) -> (d0 : compressed, d1 : compressed)")),
    ("map = (d0, d1) -> (d1 : compressed, d0 : compressed), posWidth = 0, crdWidth = 64",
     "#sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : compressed, d0 : compressed), "
     "crdWidth = 64 }>"),
    ("map = (d0, d1) -> (d0 : compressed(nonunique, nonordered), d1 : singleton(nonordered))",
     W.format("(d0, d1) -> (d0 : compressed(nonunique, nonordered), d1 : singleton(nonordered))")),
    ("map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa))",
     W.format("(d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa))")),
    ("map = (d0, d1, d2) -> (d0 : dense, d1 : loose_compressed(nonunique), d2 : singleton)",
     W.format("(d0, d1, d2) -> (d0 : dense, d1 : loose_compressed(nonunique), d2 : singleton)")),
    ("map = (i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique, soa), "
     "k : singleton(soa))",
     W.format("(d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique, soa), "
              "d2 : singleton(soa))")),
    ("map = (i, j, k, l) -> (l : compressed, k : compressed, j : dense, i : compressed)",
     W.format("(d0, d1, d2, d3) -> (d3 : compressed, d2 : compressed, d1 : dense, "
              "d0 : compressed)")),
    ("map = ( i, j ) -> ( i floordiv 2 : dense, j floordiv 3 : compressed, i mod 2 : dense, "
     "j mod 3 : dense )",
     W.format("(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 3 : compressed, d0 mod 2 : dense, "
              "d1 mod 3 : dense)")),
    ("map = {ib, jb, ii, jj} (i = ib * 2 + ii, j = jb * 3 + jj) -> (ib = i floordiv 2 : dense, "
     "jb = j floordiv 3 : compressed, ii = i mod 2 : dense, jj = j mod 3 : dense)",
     W.format("(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 3 : compressed, d0 mod 2 : dense, "
              "d1 mod 3 : dense)")),
    ("map = (i, j, k) -> (i floordiv 2 : dense, j floordiv 3 : dense, k floordiv 4 : compressed,"
     " i mod 2 : dense, j mod 3 : dense, k mod 4 : dense)",
     W.format("(d0, d1, d2) -> (d0 floordiv 2 : dense, d1 floordiv 3 : dense, d2 floordiv 4 : "
              "compressed, d0 mod 2 : dense, d1 mod 3 : dense, d2 mod 4 : dense)")),
    ("map = [s0](d0, d1) -> (d0 * (s0 * 4) : dense, d0 : dense, d1 : compressed)",
     W.format("[s0](d0, d1) -> (d0 * (s0 * 4) : dense, d0 : dense, d1 : compressed)")),
    # MLIR builds products and sums in a canonical form (constant or symbolic operand on the
    # right, constants folded) and prints that: 's0 * 3 * d0' was printed before
    ("[c](i, j) -> (c * 3 * i : dense, i : dense, j : compressed)",
     W.format("[s0](d0, d1) -> (d0 * (s0 * 3) : dense, d0 : dense, d1 : compressed)")),
    ("[c](i, j) -> (2 + i * 2 * 3 + c + 0 : dense, i : dense, j : compressed)",
     W.format("[s0](d0, d1) -> (d0 * 6 + s0 + 2 : dense, d0 : dense, d1 : compressed)")),
    ("map = (d0 : #sparse_tensor<slice(1, 4, 1)>, d1 : #sparse_tensor<slice(1, 4, 2)>) -> "
     "(d0 : dense, d1 : compressed)",
     W.format("(d0 : #sparse_tensor<slice(1, 4, 1)>, d1 : #sparse_tensor<slice(1, 4, 2)>) -> "
              "(d0 : dense, d1 : compressed)")),
    ("map = (d0 : #sparse_tensor<slice(1, ?, 1)>, d1 : #sparse_tensor<slice(?, 4, 2)>) -> "
     "(d0 : dense, d1 : compressed)",
     W.format("(d0 : #sparse_tensor<slice(1, ?, 1)>, d1 : #sparse_tensor<slice(?, 4, 2)>) -> "
              "(d0 : dense, d1 : compressed)")),
    ("map = ( i, j ) -> ( i : dense, j floordiv 4 : dense, j mod 4 : block2_4 ),\n"
     "  crdWidth = 8  // we would even like just 2-bits",
     "#sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, "
     "d1 mod 4 : structured[2, 4]), crdWidth = 8 }>"),
    ("(i, j, k) -> (i : dense, k floordiv 8 : dense, j : dense, k mod 8 : structured[3, 8])",
     W.format("(d0, d1, d2) -> (d0 : dense, d2 floordiv 8 : dense, d1 : dense, "
              "d2 mod 8 : structured[3, 8])")),
    ("map = (i) -> (i : compressed), pointerBitWidth = 16, indexBitWidth = 8",
     "#sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed), posWidth = 16, "
     "crdWidth = 8 }>"),
]


@pytest.mark.parametrize("text, printed", ROUND_TRIPS)
def test_round_trip(text, printed):
    """Parsed, printed as MLIR prints it, and parsed back to an equal encoding."""
    enc = Encoding.parse(text)
    assert str(enc) == printed
    again = Encoding.parse(str(enc))
    assert again == enc and hash(again) == hash(enc)
    assert Encoding.parse(enc.map_text) == enc.with_widths(0, 0)
    assert eval(repr(enc), {"Encoding": Encoding}) == enc       # pylint: disable=eval-used


NAMED = [
    ("dense", {}, "(d0, d1) -> (d0 : dense, d1 : dense)"),
    ("dense", {"rank": 3}, "(d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : dense)"),
    ("sparse", {}, "(d0) -> (d0 : compressed)"),
    ("CSR", {}, "(d0, d1) -> (d0 : dense, d1 : compressed)"),
    ("csc", {}, "(d0, d1) -> (d1 : dense, d0 : compressed)"),
    ("DCSR", {}, "(d0, d1) -> (d0 : compressed, d1 : compressed)"),
    ("DCSC", {}, "(d0, d1) -> (d1 : compressed, d0 : compressed)"),
    ("COO", {}, "(d0, d1) -> (d0 : compressed(nonunique), d1 : singleton)"),
    ("COO", {"rank": 3}, "(d0, d1, d2) -> (d0 : compressed(nonunique), "
     "d1 : singleton(nonunique), d2 : singleton)"),
    ("COO_SOA", {}, "(d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa))"),
    ("CSF", {}, "(d0, d1, d2) -> (d0 : compressed, d1 : compressed, d2 : compressed)"),
    ("CSF", {"rank": 4}, "(d0, d1, d2, d3) -> (d0 : compressed, d1 : compressed, "
     "d2 : compressed, d3 : compressed)"),
    ("BSR", {"block": (2, 3)}, "(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 3 : compressed, "
     "d0 mod 2 : dense, d1 mod 3 : dense)"),
    ("BSC", {"block": (2, 4)}, "(d0, d1) -> (d1 floordiv 4 : dense, d0 floordiv 2 : compressed, "
     "d0 mod 2 : dense, d1 mod 4 : dense)"),
    ("2:4", {}, "(d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4])"),
]


@pytest.mark.parametrize("name, kwargs, map_text", NAMED)
def test_named(name, kwargs, map_text):
    """Each name gives the map MLIR writes for the format, and round-trips."""
    enc = Encoding.named(name, **kwargs)
    assert enc.map_text == map_text
    assert Encoding.parse(str(enc)) == enc
    assert Encoding.named(enc) is enc and Encoding.named(map_text) == enc


def test_named_refusals():
    with pytest.raises(SparseTIRValueError, match="takes block"):
        Encoding.named("BSR")
    with pytest.raises(SparseTIRValueError, match="takes no block"):
        Encoding.named("CSR", block=(2, 2))
    with pytest.raises(SparseTIRValueError, match="unknown format name 'CSX'"):
        Encoding.named("CSX")
    with pytest.raises(SparseTIRValueError, match="CSR has rank 2"):
        Encoding.named("CSR", rank=3)
    with pytest.raises(SparseTIRValueError, match="block sizes must be positive"):
        Encoding.named("BSR", block=(0, 2))
    with pytest.raises(TypeError, match="an Encoding or a str"):
        Encoding.named(3)


def test_names_do_not_matter():
    """Equality is by meaning: the plain, renamed and explicit forms of BSR are one encoding."""
    plain = Encoding.parse("(i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, "
                           "i mod 2 : dense, j mod 3 : dense)")
    assert plain == Encoding.named("BSR", block=(2, 3))
    assert plain != Encoding.named("BSR", block=(3, 2))
    assert plain != plain.with_widths(crd_width=32)
    assert Encoding.named("CSR") != Encoding.named("CSC")
    renamed = Encoding.parse("(a, b) -> (a : dense, b : compressed)")
    assert len({Encoding.named("CSR"), renamed}) == 1


@pytest.mark.parametrize("width, dtype", [(0, np.int64), (8, np.int8), (16, np.int16),
                                          (32, np.int32), (64, np.int64)])
def test_widths_give_dtypes(width, dtype):
    enc = Encoding.parse(f"map = (i, j) -> (i : dense, j : compressed), posWidth = {width}, "
                         f"crdWidth = {width}")
    assert enc.pos_width == enc.crd_width == width
    assert enc.pos_dtype == enc.crd_dtype == np.dtype(dtype)


def test_attributes():
    """Level types, the level map's shape, blocks and level shapes, by hand."""
    bsc = Encoding.parse("(i, j) -> (j floordiv 4 : compressed, i floordiv 2 : compressed, "
                         "i mod 2 : dense, j mod 4 : dense)")
    assert bsc.dim_rank == 2 and bsc.lvl_rank == 4
    assert [str(t) for t in bsc.level_types] == ["compressed", "compressed", "dense", "dense"]
    assert [(l.op, l.dim, l.factor) for l in bsc.levels] == [
        ("floordiv", 1, 4), ("floordiv", 0, 2), ("mod", 0, 2), ("mod", 1, 4)]
    assert bsc.block_shape == (2, 4) and bsc.is_block and not bsc.is_permutation
    assert bsc.lvl_to_dim is None
    assert bsc.lvl_shape((5, 9)) == (3, 3, 2, 4)
    assert bsc.to_levels([[3], [6]]).tolist() == [[1], [1], [1], [2]]
    assert bsc.to_dims([[1], [1], [1], [2]]).tolist() == [[3], [6]]
    csc = Encoding.named("CSC")
    assert csc.lvl_to_dim == (1, 0) and csc.is_permutation and csc.block_shape == (1, 1)
    assert csc.level_types == (LevelType("dense"), LevelType("compressed"))
    coo = Encoding.named("COO")
    assert coo.level_types[0] == LevelType("compressed", unique=False)
    assert not coo.level_types[1].has_positions and coo.level_types[1].has_coordinates
    sliced = Encoding.parse("(i : #sparse_tensor<slice(1, ?, 2)>, j) -> (i : dense, "
                            "j : compressed)")
    assert sliced.slices == (Slice(1, None, 2), None)
    assert sliced.without_slices() == Encoding.named("CSR")
    ell = Encoding.parse("[c](i, j) -> (c * 3 * i : dense, i : dense, j : compressed)")
    assert ell.symbols == ("s0",) and ell.levels[0].op == "expr"
    assert ell.lvl_shape((4, 5), symbols=(2,)) == (19, 4, 5)
    with pytest.raises(SparseTIRValueError, match=r"symbols=\(\.\.\.\)"):
        ell.lvl_shape((4, 5))


# (text, column, what the message says)
ERRORS = [
    ("(i, j) -> (i : dense, i : compressed)", 23, "dimension i is used twice (levels 0 and 1)"),
    ("(i, j) -> (i : dense)", 5, "dimension j is used by no level"),
    ("(i, j) -> (i floordiv 2 : dense, j : compressed)", 12,
     "'i floordiv 2' without its 'i mod 2'"),
    ("(i, j) -> (i : dense, j mod 3 : compressed)", 23, "'j mod 3' without its 'j floordiv 3'"),
    ("(i, j) -> (i floordiv 2 : dense, j : dense, i mod 3 : dense)", 45,
     "'i mod 3' does not match 'i floordiv 2'"),
    ("(i, j) -> (i : dense, j mod 4 : structured[2, 4], j floordiv 4 : dense)", 33,
     "structured[2, 4] must be the innermost (last) level"),
    ("(i, j) -> (i : dense, j floordiv 2 : dense, j mod 2 : structured[2, 4])", 45,
     "expected 'd mod 4' for a structured[2, 4] level"),
    ("(i, j) -> (i : dense, j : structured[3, 2])", 27,
     "expected structured[n, m] with 0 < n <= m"),
    ("(i, j) -> (i : dense, j : compresed)", 27, "expected a level type (dense, compressed, "
     "loose_compressed, singleton, structured), got 'compresed'"),
    ("(i, j) -> (i : dense j : compressed)", 22, "expected ',' or ')', got 'j'"),
    ("(i, j) -> (i : dense, j : singleton)", 27,
     "a singleton level must follow a compressed or loose_compressed level, got dense"),
    # the rules of MLIR's verifier (invalid_encoding.mlir) that were accepted before
    ("(i, j, k) -> (i : compressed(nonunique), j : singleton, k : compressed)", 61,
     "every level after a singleton level is a singleton, got compressed"),
    ("(i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique, soa), k : singleton)", 77,
     "the singleton levels of a COO region are all soa or none is"),
    ("(i, j, k) -> (i : dense, k floordiv 4 : compressed, j : dense, k mod 4 : structured[2, 4])",
     41, "every level before a structured[2, 4] level is dense, got compressed"),
    ("(i, j, k) -> (i floordiv 2 : dense, i mod 2 : dense, j : dense, k floordiv 4 : dense, "
     "k mod 4 : structured[2, 4])", 37,
     "a structured[2, 4] level blocks only its own dimension (k), got 'i mod 2'"),
    ("(i) -> (i mod 4 : dense, i floordiv 4 : dense)", 9,
     "'i mod 4' comes before its 'i floordiv 4' (expected the floordiv level first)"),
    ("{a, b} (i = a, j = b) -> (i : dense, j : dense)", 27,
     "expected level variable 'a' here, got 'i'"),
    ("{a, b} (i = a, j = b) -> (a : dense, b : dense)", 29,
     "expected '=' (the explicit form binds each level: 'a = ...'), got ':'"),
    # bad input: constants beyond int64 and nesting deep enough to exhaust Python's stack
    ("(i) -> (i floordiv 9223372036854775808 : dense, i mod 2 : dense)", 20,
     "expected an integer below 2**63, got 9223372036854775808"),
    ("(i) -> (" + "(" * 600 + "i" + ")" * 600 + " : dense)", 210,
     "expected an expression of at most 200 tokens"),
    ("(i, j) -> (i : dense(nonunique), j : compressed)", 22, "dense levels cannot be nonunique"),
    ("(i, j) -> (i : compressed(soa), j : compressed)", 27, "compressed levels cannot be soa"),
    ("(i, j) -> (i : compressed(fast), j : compressed)", 27, "expected a level property"),
    ("(i, j) -> (i + j : dense, j : compressed)", 12, "expected a dimension, 'd floordiv c' or "
     "'d mod c' (c > 0) as a level expression, got 'i + j'"),
    ("(i, j) -> (k : dense, j : compressed)", 12, "got the undeclared name 'k'"),
    ("(i, i) -> (i : dense)", 5, "the name 'i' is declared twice"),
    ("map = (i) -> (i : dense), posWidth = 12", 38, "expected a width of 0, 8, 16, 32, 64, got 12"),
    ("map = (i) -> (i : dense), posWidth = 8, posWidth = 8", 41, "posWidth is given twice"),
    ("map = (i) -> (i : dense), dimLevelType = 8", 27, "expected 'map', 'posWidth' or 'crdWidth'"),
    ("#sparse_tensor.encoding<{ map = (i) -> (i : dense) }", 53, "expected '>', got the end"),
    ("(i) -> (i : dense) @", 20, "unexpected character '@'"),
    ("(i : #sparse_tensor<slice(1, 0, 1)>) -> (i : dense)", 30, "expected a positive slice size"),
    ("(i : #sparse_tensor<slice(1, x, 1)>) -> (i : dense)", 30,
     "expected the slice's size (an integer or '?')"),
    ("{a, b} (i = a + 1, j = b) -> (a = i : dense, b = j : dense)", 9,
     "the definition of i does not invert the level expressions"),
    ("{a, b} (i = a, j = b) -> (b = i : dense, a = j : dense)", 27,
     "expected level variable 'a' here, got 'b'"),
    ("posWidth = 8", 1, "expected a 'map = (...) -> (...)' entry"),
    ("[s](i, j) -> (i * j * s : dense, i : dense, j : compressed)", 17,
     "expected one side of '*' to be a constant or a symbol expression"),
    ("[s](i, j) -> (s floordiv j : dense, i : dense, j : compressed)", 17,
     "expected the right side of 'floordiv' to be a constant or a symbol expression"),
    ("#sparse_tensor.encoding<{}>", 26, "expected 'map', 'posWidth' or 'crdWidth', got '}'"),
    ("map = (i) -> (i : dense),, posWidth = 8", 26,
     "expected 'map', 'posWidth' or 'crdWidth', got ','"),
]


@pytest.mark.parametrize("text, column, message", ERRORS)
def test_errors_name_the_column(text, column, message):
    with pytest.raises(EncodingError) as info:
        Encoding.parse(text)
    assert info.value.column == column, str(info.value)
    assert str(info.value).startswith(f"column {column}: ")
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_error_on_a_later_line():
    """Text over several lines: the message names the line and the column within it."""
    with pytest.raises(EncodingError, match=r"^line 3, column 7: 'i floordiv 2' without") as info:
        Encoding.parse("#sparse_tensor.encoding<{\n  map = (i, j) ->\n    ( i floordiv 2 : "
                       "dense, j : compressed )\n}>")
    assert (info.value.line, info.value.column) == (3, 7)


def test_built_in_code_names_the_level():
    """An encoding built from levels in code (no text) names the level in its errors."""
    from sparsetir.format.affine import Affine           # pylint: disable=import-outside-toplevel
    with pytest.raises(EncodingError, match="^level 1: dimension d0 is used twice"):
        Encoding([(Affine.dim(0), LevelType("dense")), (Affine.dim(0), LevelType("dense"))], 1)
    with pytest.raises(EncodingError, match="crd_width must be one of"):
        Encoding([(Affine.dim(0), LevelType("dense"))], 1, crd_width=7)


def test_built_in_code_refuses_bad_parts():
    """Parts built in code are checked like text (they raised IndexError, AttributeError or
    nothing at all before)."""
    from sparsetir.format.affine import Affine           # pylint: disable=import-outside-toplevel
    dense = LevelType("dense")
    with pytest.raises(EncodingError, match="^level 0: dimension 3 is not declared"):
        Encoding([(Affine.dim(3), dense)], 1)
    with pytest.raises(SparseTIRTypeError, match=r"level 0: expected \(Affine, LevelType\), "
                       r"got \(str, LevelType\)"):
        Encoding([("d0", dense)], 1)
    with pytest.raises(SparseTIRTypeError, match="dim_rank must be a non-negative int"):
        Encoding([(Affine.dim(0), dense)], "1")
    with pytest.raises(EncodingError, match="is 2\\*\\*63 or more"):
        Encoding([(Affine.binary(op, Affine.dim(0), Affine.const(2**64)), dense)
                  for op in ("floordiv", "mod")], 1)
    with pytest.raises(EncodingError, match="expected a level type"):
        LevelType("blocked")
    with pytest.raises(EncodingError, match=r"0 < n <= m, got \[0, 4\]"):
        LevelType("structured", n=0, m=4)
    with pytest.raises(EncodingError, match="dense levels cannot be nonunique"):
        LevelType("dense", unique=False)
    with pytest.raises(EncodingError, match="compressed levels cannot be soa"):
        LevelType("compressed", soa=True)


def test_explicit_form_with_a_large_block():
    """Checking the explicit form's definitions samples a few points per block size (it
    allocated one per value up to three blocks before: 21.8 TiB here)."""
    enc = Encoding.parse("{a, b} (i = a * 1000000000000 + b) -> (a = i floordiv 1000000000000 "
                         ": dense, b = i mod 1000000000000 : dense)")
    assert enc.block_shape == (1000000000000,)
    with pytest.raises(EncodingError, match="at i = 0 it gives 1"):
        Encoding.parse("{a, b} (i = a * 1000000000000 + b + 1) -> (a = i floordiv "
                       "1000000000000 : dense, b = i mod 1000000000000 : dense)")


def test_slices_and_level_types_built_in_code_are_checked():
    """What the text parser refuses is refused from code too: a negative offset, a stride of
    0 or below (a silently empty or reversed window, a ZeroDivisionError), a tuple is taken
    as a slice; flags and counts of a LevelType are booleans and integers."""
    from sparsetir.format.affine import Affine           # pylint: disable=import-outside-toplevel
    levels = [(Affine.dim(0), LevelType("dense")), (Affine.dim(1), LevelType("compressed"))]
    for bad, message in [(Slice(-2, 2, 1), "offset must be None"),
                         (Slice(2, 2, -1), "stride must be None"),
                         (Slice(0, None, 0), "stride must be None"),
                         (Slice(0, 0, 1), "size must be None"), (5, "must be \\(offset")]:
        with pytest.raises(EncodingError, match=f"dimension 0's slice {message}"):
            Encoding(levels, 2, slices=[bad, None])
    assert Encoding(levels, 2, slices=[(0, 2, 1), None]).slices[0] == Slice(0, 2, 1)
    with pytest.raises(EncodingError, match="stride must be None .* to 2\\*\\*63 - 1"):
        Encoding(levels, 2, slices=[Slice(0, 1, 2**70), None])      # an OverflowError later
    with pytest.raises(EncodingError, match="m must be an integer from 0 to 2\\*\\*63 - 1"):
        LevelType("structured", n=1, m=2**63)                        # printed, did not parse
    with pytest.raises(EncodingError, match="slices must be a list"):
        Encoding(levels, 2, slices=5)
    with pytest.raises(EncodingError, match="unique must be True or False, got 'no'"):
        LevelType("compressed", unique="no")
    with pytest.raises(EncodingError, match="n must be an integer from 0 to 2\\*\\*63 - 1, got 2.5"):
        LevelType("structured", n=2.5, m=4)


@pytest.mark.parametrize("text, message", [
    ("(i, j) -> (i : dense, j floordiv " + "9" * 5000 + " : compressed)",
     "expected an integer below 2\\*\\*63"),
    ("(i, j) -> (i floordiv 4 : dense, j : compressed, i mod ٣ : dense)",
     "unexpected character '٣'"),
])
def test_numbers_past_int64_or_not_ascii_are_named(text, message):
    """A 5000-digit number reached int() (Python's own 4300-digit limit, a bare ValueError);
    a non-ASCII digit is not a number in MLIR's syntax."""
    with pytest.raises(EncodingError, match=message):
        Encoding.parse(text)


@pytest.mark.parametrize("wrong_term", ["ib floordiv 3", "ib floordiv 1000"])
def test_a_definition_wrong_only_past_the_first_blocks_is_refused(wrong_term):
    """Only blocks 0..2 were checked: a term that is 0 there (ib floordiv 3) passed."""
    with pytest.raises(EncodingError, match="the definition of i does not invert"):
        Encoding.parse(f"{{ib, ii, j}}(i = ib * 4 + ii + {wrong_term}, j = j) -> (ib = i "
                       "floordiv 4 : dense, ii = i mod 4 : dense, j = j : compressed)")

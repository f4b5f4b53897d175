/*
 * sparsetir_fastcall: the common call of a bound kernel in C (see sparsetir/runtime/native_call.py).
 *
 * A Plan holds a compiled TVM function, the converted values of its bound parameters and, for
 * each free buffer parameter, what an argument must be to go straight to the function: exactly
 * a numpy.ndarray, C-contiguous, of the parameter's item format and size, shaped as the
 * parameter is declared or flat, aligned, writable when the kernel writes it, and (when
 * written) overlapping no other argument and no bound or protected range. plan(args) checks
 * the arguments through the buffer protocol, passes them as DLTensor pointers and returns
 * True; it returns False, with nothing run, for any argument it does not recognise (the caller
 * then takes its general path). The GIL is released while the function runs. An error raised
 * by the function is raised as the Python exception of its kind (ValueError, TypeError...,
 * RuntimeError for others) with its message.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <tvm/ffi/c_api.h>

#define MAX_SLOTS 8
#define MAX_DIMS 4

typedef int (*call_fn)(TVMFFIObjectHandle, TVMFFIAny *, int32_t, TVMFFIAny *);
typedef void (*move_error_fn)(TVMFFIObjectHandle *);
typedef int (*dec_ref_fn)(TVMFFIObjectHandle);

static call_fn ffi_call;
static move_error_fn ffi_move_error;
static dec_ref_fn ffi_dec_ref;
static PyObject *ndarray_type;

typedef struct {
  int position, written, any_shape, dims_ndim, passed_ndim;
  char format[8];
  Py_ssize_t itemsize;
  int64_t length, alignment;
  Py_ssize_t dims[MAX_DIMS];
  int64_t passed_shape[MAX_DIMS];
  DLDataType dtype;
} Slot;

typedef struct {
  PyObject_HEAD
  PyObject *keep; /* the function and bound values, kept alive */
  TVMFFIObjectHandle function;
  int n_values, n_slots, n_fixed;
  TVMFFIAny *values;
  Slot slots[MAX_SLOTS];
  uintptr_t *fixed_starts, *fixed_ends; /* merged, sorted, disjoint */
} Plan;

static void plan_dealloc(Plan *self) {
  Py_XDECREF(self->keep);
  PyMem_Free(self->values);
  PyMem_Free(self->fixed_starts);
  PyMem_Free(self->fixed_ends);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Plan(function_handle, keep, values, slots, fixed_starts, fixed_ends)
 *   values: list of None (free), int (a scalar), or ("tensor", handle)
 *   slots: tuples (position, written, format, itemsize, length, dims, passed_shape,
 *                  alignment, dtype_code, dtype_bits, any_shape) */
static int plan_init(Plan *self, PyObject *args, PyObject *kwargs) {
  unsigned long long function;
  PyObject *keep, *values, *slots, *starts, *ends;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "Plan takes no keyword arguments");
    return -1;
  }
  if (self->values != NULL) {
    PyErr_SetString(PyExc_TypeError, "a Plan is initialised once");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "KOO!O!O!O!", &function, &keep, &PyList_Type, &values,
                        &PyTuple_Type, &slots, &PyTuple_Type, &starts, &PyTuple_Type, &ends))
    return -1;
  if (PyTuple_GET_SIZE(slots) > MAX_SLOTS || PyTuple_GET_SIZE(starts) != PyTuple_GET_SIZE(ends)) {
    PyErr_SetString(PyExc_ValueError, "a plan the native call cannot hold");
    return -1;
  }
  Py_INCREF(keep);
  self->keep = keep;
  self->n_values = (int)PyList_GET_SIZE(values);
  self->values = PyMem_Calloc(self->n_values ? self->n_values : 1, sizeof(TVMFFIAny));
  if (self->values == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  for (int i = 0; i < self->n_values; ++i) {
    PyObject *v = PyList_GET_ITEM(values, i);
    TVMFFIAny *any = &self->values[i];
    if (v == Py_None) {
      any->type_index = kTVMFFINone;
    } else if (PyLong_Check(v)) {
      any->type_index = kTVMFFIInt;
      any->v_int64 = PyLong_AsLongLong(v);
    } else if (PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 2) {
      any->type_index = kTVMFFITensor;
      any->v_obj = (TVMFFIObject *)(uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(v, 1));
    } else {
      PyErr_SetString(PyExc_TypeError, "a bound value must be None, an int or (\"tensor\", handle)");
      return -1;
    }
  }
  for (int k = 0; k < (int)PyTuple_GET_SIZE(slots); ++k) {
    Slot *s = &self->slots[k];
    const char *format;
    PyObject *dims, *passed;
    int code, bits;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots, k), "iisnLO!O!Liii", &s->position, &s->written,
                          &format, &s->itemsize, &s->length, &PyTuple_Type, &dims, &PyTuple_Type,
                          &passed, &s->alignment, &code, &bits, &s->any_shape))
      return -1;
    if (strlen(format) >= sizeof(s->format) || PyTuple_GET_SIZE(dims) > MAX_DIMS ||
        PyTuple_GET_SIZE(dims) == 0 || PyTuple_GET_SIZE(passed) > MAX_DIMS ||
        s->alignment <= 0 || s->position < 0 || s->position >= self->n_values) {
      PyErr_SetString(PyExc_ValueError, "a slot the native call cannot hold");
      return -1;
    }
    strcpy(s->format, format);
    s->dims_ndim = (int)PyTuple_GET_SIZE(dims);
    for (int d = 0; d < s->dims_ndim; ++d) s->dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(dims, d));
    s->passed_ndim = (int)PyTuple_GET_SIZE(passed);
    for (int d = 0; d < s->passed_ndim; ++d)
      s->passed_shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(passed, d));
    s->dtype.code = (uint8_t)code;
    s->dtype.bits = (uint8_t)bits;
    s->dtype.lanes = 1;
  }
  self->n_slots = (int)PyTuple_GET_SIZE(slots);
  self->n_fixed = (int)PyTuple_GET_SIZE(starts);
  self->fixed_starts = PyMem_Calloc(self->n_fixed + 1, sizeof(uintptr_t));
  self->fixed_ends = PyMem_Calloc(self->n_fixed + 1, sizeof(uintptr_t));
  if (self->fixed_starts == NULL || self->fixed_ends == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  for (int i = 0; i < self->n_fixed; ++i) {
    self->fixed_starts[i] = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(starts, i));
    self->fixed_ends[i] = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ends, i));
  }
  if (PyErr_Occurred()) return -1;
  self->function = (TVMFFIObjectHandle)(uintptr_t)function; /* set last: a Plan is usable */
  return 0;
}

static int shape_matches(const Slot *s, const Py_buffer *view) {
  if (view->ndim > 0 && view->ndim == s->dims_ndim) {
    int same = 1;
    for (int d = 0; d < s->dims_ndim; ++d) same &= view->shape[d] == s->dims[d];
    if (same) return 1;
  }
  if (view->ndim == 1 && view->shape[0] == s->length) return 1;
  return s->any_shape && view->ndim > 0 && view->len == s->length * s->itemsize;
}

static int overlaps_fixed(const Plan *self, uintptr_t start, uintptr_t end) {
  int lo = 0, hi = self->n_fixed; /* first range whose end > start */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (self->fixed_ends[mid] <= start) lo = mid + 1; else hi = mid;
  }
  return lo < self->n_fixed && self->fixed_starts[lo] < end;
}

/* The Python exception of an FFI error kind, as tvm_ffi raises them (RuntimeError otherwise). */
static PyObject *error_type(PyObject *kind) {
  static const struct { const char *name; PyObject **type; } known[] = {
      {"ValueError", &PyExc_ValueError}, {"TypeError", &PyExc_TypeError},
      {"IndexError", &PyExc_IndexError}, {"KeyError", &PyExc_KeyError},
      {"AttributeError", &PyExc_AttributeError}, {"MemoryError", &PyExc_MemoryError}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); ++i)
    if (PyUnicode_CompareWithASCIIString(kind, known[i].name) == 0) return *known[i].type;
  return PyExc_RuntimeError;
}

static PyObject *plan_call(Plan *self, PyObject *args, PyObject *kwargs) {
  Py_buffer views[MAX_SLOTS];
  DLTensor tensors[MAX_SLOTS];
  TVMFFIAny stack_values[64];
  TVMFFIAny *values = stack_values;
  int taken = 0, ok = 1;
  PyObject *result = NULL;
  if (self->function == NULL) {
    PyErr_SetString(PyExc_TypeError, "the Plan was not initialised");
    return NULL;
  }
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "a Plan takes no keyword arguments");
    return NULL;
  }
  if (self->n_values > 64 && (values = PyMem_Malloc(self->n_values * sizeof(TVMFFIAny))) == NULL)
    return PyErr_NoMemory();
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != self->n_slots) ok = 0;
  memcpy(values, self->values, self->n_values * sizeof(TVMFFIAny));
  for (int k = 0; ok && k < self->n_slots; ++k) {
    const Slot *s = &self->slots[k];
    PyObject *arg = PyTuple_GET_ITEM(args, k);
    if ((PyObject *)Py_TYPE(arg) != ndarray_type) { ok = 0; break; }
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (s->written ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(arg, &views[k], flags) != 0) { PyErr_Clear(); ok = 0; break; }
    taken = k + 1;
    const Py_buffer *view = &views[k];
    if (view->buf == NULL || view->itemsize != s->itemsize || strcmp(view->format ? view->format : "B", s->format) != 0 ||
        !PyBuffer_IsContiguous(view, 'C') || !shape_matches(s, view) ||
        ((uintptr_t)view->buf) % (uintptr_t)s->alignment != 0) { ok = 0; break; }
    tensors[k].data = view->buf;
    tensors[k].device.device_type = kDLCPU;
    tensors[k].device.device_id = 0;
    tensors[k].ndim = s->passed_ndim;
    tensors[k].dtype = s->dtype;
    tensors[k].shape = (int64_t *)s->passed_shape;
    tensors[k].strides = NULL;
    tensors[k].byte_offset = 0;
    values[s->position].type_index = kTVMFFIDLTensorPtr;
    values[s->position].zero_padding = 0;
    values[s->position].v_ptr = &tensors[k];
  }
  for (int k = 0; ok && k < self->n_slots; ++k) { /* a written buffer overlaps nothing else */
    if (!self->slots[k].written) continue;
    uintptr_t start = (uintptr_t)views[k].buf, end = start + (uintptr_t)views[k].len;
    for (int j = 0; ok && j < self->n_slots; ++j) {
      uintptr_t other = (uintptr_t)views[j].buf;
      if (j != k && start < other + (uintptr_t)views[j].len && other < end) ok = 0;
    }
    if (ok && overlaps_fixed(self, start, end)) ok = 0;
  }
  if (ok) {
    TVMFFIAny ret;
    memset(&ret, 0, sizeof(ret));
    ret.type_index = kTVMFFINone;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* the views keep the arrays' memory; the plan is the caller's */
    rc = ffi_call(self->function, values, self->n_values, &ret);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
      TVMFFIObjectHandle error = NULL;
      ffi_move_error(&error);
      if (error != NULL) {
        TVMFFIErrorCell *cell = (TVMFFIErrorCell *)((char *)error + sizeof(TVMFFIObject));
        PyObject *kind = PyUnicode_DecodeUTF8(cell->kind.data, (Py_ssize_t)cell->kind.size, "replace");
        PyObject *text = PyUnicode_DecodeUTF8(cell->message.data, (Py_ssize_t)cell->message.size,
                                              "replace");
        if (kind != NULL && text != NULL) PyErr_SetObject(error_type(kind), text);
        Py_XDECREF(kind);
        Py_XDECREF(text);
        ffi_dec_ref(error);
      } else {
        PyErr_SetString(PyExc_RuntimeError, "the kernel failed without an error object");
      }
    } else {
      if (ret.type_index >= kTVMFFIStaticObjectBegin && ret.v_obj != NULL) ffi_dec_ref(ret.v_obj);
      result = Py_True;
      Py_INCREF(result);
    }
  } else {
    result = Py_False;
    Py_INCREF(result);
  }
  for (int k = 0; k < taken; ++k) PyBuffer_Release(&views[k]);
  if (values != stack_values) PyMem_Free(values);
  return result;
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparsetir_fastcall.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_call = (ternaryfunc)plan_call,
    .tp_doc = "A bound kernel's common call in C (see the module source).",
};

/* setup(call_address, move_error_address, dec_ref_address, numpy.ndarray) */
static PyObject *setup(PyObject *module, PyObject *args) {
  unsigned long long call, move_error, dec_ref;
  PyObject *type;
  if (!PyArg_ParseTuple(args, "KKKO", &call, &move_error, &dec_ref, &type)) return NULL;
  ffi_call = (call_fn)(uintptr_t)call;
  ffi_move_error = (move_error_fn)(uintptr_t)move_error;
  ffi_dec_ref = (dec_ref_fn)(uintptr_t)dec_ref;
  Py_XDECREF(ndarray_type);
  Py_INCREF(type);
  ndarray_type = type;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "Give the module tvm-ffi's entry points and numpy.ndarray."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "sparsetir_fastcall", NULL, -1,
                                        methods};

PyMODINIT_FUNC PyInit_sparsetir_fastcall(void) {
  if (PyType_Ready(&PlanType) < 0) return NULL;
  PyObject *module = PyModule_Create(&module_def);
  if (module == NULL) return NULL;
  Py_INCREF(&PlanType);
  if (PyModule_AddObject(module, "Plan", (PyObject *)&PlanType) < 0) {
    Py_DECREF(&PlanType);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}

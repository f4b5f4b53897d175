/*
 * sparsetir_fastcall: the common call of a bound kernel in C (see sparsetir/runtime/native_call.py).
 *
 * A Plan holds a compiled TVM function, the converted values of its bound parameters and, for
 * each free buffer parameter, what an argument must be to go straight to the function, read
 * by name from the parameter's sparsetir.runtime.acceptance.Acceptance (the spec the Python
 * paths check too): exactly a numpy.ndarray, C-contiguous, of the parameter's item format and
 * size, with `length` elements, flat or of the declared dims (any shape when none is
 * declared: Acceptance.shape_fits), aligned (Acceptance.aligned), writable when the kernel
 * writes it, and (when written) overlapping no other argument and no bound or protected
 * range. plan(args) checks the arguments through the buffer protocol, passes them as
 * DLTensor pointers and returns True; it returns False, with nothing run, for any argument it
 * does not recognise (the caller then takes its general path). The GIL is released while the
 * function runs. An error raised by the function is raised as the Python exception tvm-ffi
 * raises for its kind (the error factory given to setup: tvm-ffi's registry, where
 * "sparsetir.ArgumentError" is sparsetir's ArgumentError) with its message.
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
static PyObject *error_factory; /* (kind, message) -> the exception tvm-ffi would raise */

/* One free buffer parameter's Acceptance (sparsetir/runtime/acceptance.py), its fields read by
 * name when the Plan is made. */
typedef struct {
  int position, written, any_shape, dims_ndim, passed_ndim;
  char format[8];                  /* buffer_format */
  Py_ssize_t itemsize;
  long long length, alignment;
  int64_t dims[MAX_DIMS];          /* () when only the length is declared */
  int64_t passed_shape[MAX_DIMS];  /* the shape the compiled function takes */
  DLDataType dtype;                /* dlpack_code, dlpack_bits */
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

/* *out = the integer attribute `name` of `obj`; -1 with an exception set on failure. */
static int read_int(PyObject *obj, const char *name, long long *out) {
  PyObject *value = PyObject_GetAttrString(obj, name);
  if (value == NULL) return -1;
  *out = PyLong_AsLongLong(value);
  Py_DECREF(value);
  return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* *out = the truth of the attribute `name` of `obj`. */
static int read_flag(PyObject *obj, const char *name, int *out) {
  PyObject *value = PyObject_GetAttrString(obj, name);
  if (value == NULL) return -1;
  *out = PyObject_IsTrue(value);
  Py_DECREF(value);
  return *out < 0 ? -1 : 0;
}

/* The tuple of ints `name` of `obj` into out[MAX_DIMS], its size into *ndim. */
static int read_shape(PyObject *obj, const char *name, int64_t *out, int *ndim) {
  PyObject *value = PyObject_GetAttrString(obj, name);
  if (value == NULL) return -1;
  int ok = PyTuple_Check(value) && PyTuple_GET_SIZE(value) <= MAX_DIMS;
  if (ok) {
    *ndim = (int)PyTuple_GET_SIZE(value);
    for (int d = 0; d < *ndim; ++d) out[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(value, d));
  } else {
    PyErr_Format(PyExc_ValueError, "%s must be a tuple of at most %d ints", name, MAX_DIMS);
  }
  Py_DECREF(value);
  return !ok || PyErr_Occurred() ? -1 : 0;
}

/* Fill `s` from the fields of the Acceptance `accept`, read by name; the buffer format from
 * the field `format_field` ("buffer_format", or "torch_view_format" for a plan of torch
 * tensors' numpy views). */
static int read_slot(PyObject *accept, const char *format_field, Slot *s) {
  long long position, itemsize, code, bits;
  PyObject *format = PyObject_GetAttrString(accept, format_field);
  if (format == NULL) return -1;
  const char *text = PyUnicode_AsUTF8(format);
  int fits = text != NULL && strlen(text) < sizeof(s->format);
  if (fits) strcpy(s->format, text);
  Py_DECREF(format);
  if (!fits) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a buffer format too long");
    return -1;
  }
  if (read_int(accept, "position", &position) || read_int(accept, "itemsize", &itemsize) ||
      read_int(accept, "length", &s->length) || read_int(accept, "alignment", &s->alignment) ||
      read_int(accept, "dlpack_code", &code) || read_int(accept, "dlpack_bits", &bits) ||
      read_flag(accept, "written", &s->written) || read_flag(accept, "any_shape", &s->any_shape) ||
      read_shape(accept, "dims", s->dims, &s->dims_ndim) ||
      read_shape(accept, "passed_shape", s->passed_shape, &s->passed_ndim))
    return -1;
  s->position = (int)position;
  s->itemsize = (Py_ssize_t)itemsize;
  s->dtype.code = (uint8_t)code;
  s->dtype.bits = (uint8_t)bits;
  s->dtype.lanes = 1;
  return 0;
}

/* Plan(function_handle, keep, values, accepts, fixed_starts, fixed_ends[, format_field])
 *   values: list of None (free), int (a scalar), or ("tensor", handle)
 *   accepts: the Acceptance of each free buffer parameter, in call order
 *   format_field: the Acceptance field holding the buffer format to accept (read_slot) */
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
  const char *format_field = "buffer_format";
  if (!PyArg_ParseTuple(args, "KOO!O!O!O!|s", &function, &keep, &PyList_Type, &values,
                        &PyTuple_Type, &slots, &PyTuple_Type, &starts, &PyTuple_Type, &ends,
                        &format_field))
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
    if (read_slot(PyTuple_GET_ITEM(slots, k), format_field, s) != 0) return -1;
    if (s->alignment <= 0 || s->itemsize <= 0 || s->passed_ndim == 0 || s->position < 0 ||
        s->position >= self->n_values) {
      PyErr_SetString(PyExc_ValueError, "an acceptance the native call cannot hold");
      return -1;
    }
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

/* `length` elements (of the slot's itemsize, checked first), and Acceptance.shape_fits: flat,
 * of any shape when none is declared, else of the declared dims. */
static int shape_fits(const Slot *s, const Py_buffer *view) {
  if (view->len != (Py_ssize_t)s->length * s->itemsize) return 0;
  if (view->ndim <= 1 || s->any_shape) return 1;
  if (view->ndim != s->dims_ndim) return 0;
  for (int d = 0; d < s->dims_ndim; ++d)
    if (view->shape[d] != s->dims[d]) return 0;
  return 1;
}

static int overlaps_fixed(const Plan *self, uintptr_t start, uintptr_t end) {
  int lo = 0, hi = self->n_fixed; /* first range whose end > start */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (self->fixed_ends[mid] <= start) lo = mid + 1; else hi = mid;
  }
  return lo < self->n_fixed && self->fixed_starts[lo] < end;
}

/* Raise the exception tvm-ffi raises for an error of `kind` with `text` (error_factory). */
static void raise_ffi_error(PyObject *kind, PyObject *text) {
  PyObject *error = PyObject_CallFunctionObjArgs(error_factory, kind, text, NULL);
  if (error == NULL) return; /* the factory's own exception stays set */
  PyErr_SetObject((PyObject *)Py_TYPE(error), error);
  Py_DECREF(error);
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
        !PyBuffer_IsContiguous(view, 'C') || !shape_fits(s, view) ||
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
        if (kind != NULL && text != NULL) raise_ffi_error(kind, text);
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

/* setup(call_address, move_error_address, dec_ref_address, numpy.ndarray, error_factory) */
static PyObject *setup(PyObject *module, PyObject *args) {
  unsigned long long call, move_error, dec_ref;
  PyObject *type, *factory;
  if (!PyArg_ParseTuple(args, "KKKOO", &call, &move_error, &dec_ref, &type, &factory)) return NULL;
  if (!PyCallable_Check(factory)) {
    PyErr_SetString(PyExc_TypeError, "the error factory must be callable");
    return NULL;
  }
  ffi_call = (call_fn)(uintptr_t)call;
  ffi_move_error = (move_error_fn)(uintptr_t)move_error;
  ffi_dec_ref = (dec_ref_fn)(uintptr_t)dec_ref;
  Py_XDECREF(ndarray_type);
  Py_INCREF(type);
  ndarray_type = type;
  Py_XDECREF(error_factory);
  Py_INCREF(factory);
  error_factory = factory;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "Give the module tvm-ffi's entry points, numpy.ndarray and the error factory."},
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

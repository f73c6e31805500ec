/* vm/vm_internal.h: the VM's state, shared by vm.c (split, conversion per
 * shape class) and vm_flow.c (If, Loop, Scan). Not a public interface. */
#ifndef KILN_VM_VM_INTERNAL_H
#define KILN_VM_VM_INTERNAL_H

#include "import/onnx/onnx.h"
#include "vm/vm.h"

#define VM_CLASSES 8
#define VM_SPECS 4          /* specializations kept per input-shape class (symbolic inputs) */
#define VM_MAX_CAPTURED 256 /* names a body reads from enclosing scopes */
#define VM_READERS_MANY (1 << 30)

enum { SRC_NONE, SRC_INPUT, SRC_STATIC, SRC_DYN, SRC_INIT };

typedef struct vm_src {
    int kind;
    int index; /* INPUT: VM input; STATIC: static output; DYN: dynamic node; INIT: unused */
    int sub;   /* DYN: that node's output */
} vm_src;

typedef struct vm_class {
    unsigned char *key;
    size_t key_len;
    kiln_graph *g;
    kiln_ref_executor *ex;
    kiln_module *mod; /* a heavy node (vm.c: HEAVY_FLOPS) compiled for this class, or NULL */
    double flops;     /* of its graph (ir/cost.c) */
    int *in_slot; /* per node input: the one-node graph's input index, -1: none */
    int64_t used; /* stamp of the last run that used it */
} vm_class;

typedef struct vm_node {
    const Onnx__NodeProto *np;
    const char *name; /* for messages */
    int n_in, n_out;
    vm_src *src;             /* per input */
    bool *bound;             /* per input: bound as a constant (learned) */
    int *out_pos;            /* per output: index among the one-node graph's outputs, -1 unused */
    int *readers;            /* per output: input slots of later nodes reading it; VM_READERS_MANY
                                when a body captures it or it is a graph output */
    bool fused;              /* an Expand its one reader reads through (vm_scatter.c): not run */
    kiln_tensor view;        /* VM_VIEW (vm_view.c): output 0 as its input's data, renamed */
    bool compiled;           /* the last run ran a compiled class (a heavy node) */
    double flops;            /* the last run's class's flops (the profile's GFLOP/s) */
    bool as_view;            /* the last run made it a view or a copy (else it was converted) */
    const kiln_tensor **out; /* per output, after a run */
    const kiln_tensor **in;  /* per input, during a run */
    vm_class cls[VM_CLASSES];
    int n_cls;
    unsigned char *key;
    size_t key_cap;
    /* control flow (vm_flow.c): If, Loop, Scan */
    int flow;                 /* VM_CONVERT, or VM_IF / VM_LOOP / VM_SCAN */
    struct kiln_vm *body[2];  /* If: then, else; Loop, Scan: the body */
    int *accum;               /* Loop: per carried value, 1 + the body node that appends to it
                                 (vm_flow.c: a Concat accumulator), 0: none */
    vm_src *cap[2];           /* per body: where its captured values come from */
    kiln_tensor *own;         /* per output: the node's own copy */
    size_t *own_cap;          /* bytes allocated in own[k] */
    struct vm_seq *seq;       /* sequence ops (vm_seq.c): output 0 when it is a sequence */
    void *scratch;            /* the VM's kernels (vm_kernels.c): working memory, reused */
    size_t scratch_cap;
} vm_node;

/* A sequence value: items with data of their own, reused across runs. */
typedef struct vm_seq {
    int n, cap;
    kiln_tensor *items;
    size_t *bytes; /* allocated per item */
} vm_seq;

enum { VM_CONVERT, VM_IF, VM_LOOP, VM_SCAN, VM_SEQ, VM_KERNEL, VM_VIEW };

/* A model with symbolic or unknown input dims: one VM per input-shape class,
 * imported with the inputs' shapes bound (vm.c: spec_*). */
typedef struct vm_spec {
    struct kiln_vm *vm;
    kiln_shape *shapes; /* per input */
    int64_t used;       /* stamp of the last run */
} vm_spec;

struct kiln_vm {
    Onnx__ModelProto *m;            /* owned, unless `parent` (a body: the parent's) */
    const Onnx__GraphProto *graph;  /* m->graph, or the body */
    struct kiln_vm *parent;         /* a body's VM: its If/Loop/Scan's */
    int n_formal;                   /* a body's inputs from its node; the rest are captured */
    Onnx__ValueInfoProto *cap_vi;   /* a body: the captured inputs' names */
    kiln_tensor *init_t;            /* initializers decoded for control flow and sequences */
    bool *init_ok;
    char *base_dir;
    bool reference;
    int num_threads;       /* of compiled parts (the static part, heavy nodes) */
    char *cache_dir;       /* their object cache, or NULL: the default */
    char *target, *records; /* their target and tuning records, or NULL */
    kiln_vm_compile_fn compile; /* compiles them; NULL: no compiler (the runtime alone) */
    /* the weights its builds packed (util/packmemo.h), for the next class:
     * the model owner's (created with its first compile, owned), a
     * specialization's its generic VM's */
    struct kiln_pack_memo *memo;
    bool memo_owned;
    int n_in, n_out;
    const Onnx__ValueInfoProto **in_vi, **out_vi;
    kiln_dtype *in_dt, *out_dt;
    kiln_shape *in_shape, *out_shape;
    kiln_tensor *in_t; /* owned copies */
    bool *in_set;
    vm_src *out_src;
    /* static part */
    kiln_graph *sg;
    kiln_ref_executor *sex;
    kiln_module *smod;
    int s_n_in, s_n_out;
    int *s_in_map;            /* static input -> VM input */
    const char **s_out_names; /* the static part's outputs */
    /* dynamic part */
    int n_dyn;
    vm_node *dyn;
    int64_t stamp, conversions;
    /* symbolic input dims (the generic VM): nothing is imported at create;
     * each input-shape class gets a VM of its own (a specialization, whose
     * ModelProto is borrowed from this one), VM_SPECS of them kept, the
     * least recently used one replaced */
    bool generic;
    bool borrowed_m;       /* a specialization: m belongs to the generic VM, and so
                              does in_t's data (aliased at each run, not copied) */
    size_t *in_cap;        /* generic: bytes allocated per input (grown, never shrunk) */
    vm_spec spec[VM_SPECS];
    int n_spec;
    struct kiln_vm *active; /* the specialization of the last run (or step 0) */
    int64_t n_specialized;  /* specializations created so far */
    const kiln_onnx_binding *bind; /* during a specialization's create: its input shapes */
    int n_bind;
    /* a symbolic batch (vm_batch.c): a generic VM whose only symbolic dims are
     * axis 0 of its inputs, and whose graph keeps the items apart, runs a batch
     * as chunks of VM_CHUNKS' extents, one specialization each */
    int batch_mode;         /* generic: 0 undecided, 1 chunks, -1 one VM per class */
    bool *batch_in;         /* generic: per input, axis 0 is its one symbolic dim */
    char batch_why[256];    /* generic: why the model does not run in chunks */
    struct vm_chunk *chunk; /* generic: the last run's chunks, in item order */
    int n_chunk, cap_chunk;
    kiln_tensor *bout;      /* generic, in chunks: the outputs, chunks joined */
    size_t *bout_cap;       /* bytes allocated per output (grown, never shrunk) */
    int64_t batch_c;        /* a specialization built as a chunk: its extent (0: not one) */
    bool batch_probe;       /* ...only imported and checked, not compiled */
    const bool *batch_of;   /* ...the generic VM's batch_in */
    kiln_shape *want;       /* generic: per input, the shapes a specialization is looked up by */
    /* a VM loaded from a compiled .so (vm_so.c): its static part is the .so's
     * own module; no_cc: a heavy node's compile found no C compiler, so heavy
     * classes run on reference kernels (the root VM's flag, bodies included) */
    bool from_so;
    bool no_cc;
};

/* Decodes initializer i of vm->graph into init_t[i] (once). */
kiln_status kiln_vm_load_init(kiln_vm *vm, int i, kiln_error *err);
/* The tensor a source names (NULL for nothing, or an initializer not loaded). */
const kiln_tensor *kiln_vm_value(const kiln_vm *vm, vm_src s);
/* Where value `name` comes from for dynamic node `before` (or the outputs:
 * before = n_dyn); kind -1 when it is not defined. */
vm_src kiln_vm_resolve(const kiln_vm *vm, const char *name, int before);
/* A VM for body graph g of node `nd` of `parent`: every node dynamic, inputs
 * g's inputs then the names g reads from outer scopes (*n_cap of them, in
 * *cap_names, owned by the body VM). */
kiln_status kiln_vm_create_body(kiln_vm *parent, const Onnx__GraphProto *g, kiln_vm **out,
                                kiln_error *err);
int kiln_vm_num_captured(const kiln_vm *body);
/* How many of np's input slots read value `name`. */
int kiln_vm_node_reads(const Onnx__NodeProto *np, const char *name);
/* The names body graph g (and its nested bodies) reads but does not define. */
int kiln_vm_free_names(const Onnx__GraphProto *g, const char **names, int max);

/* vm.c: the input/output tables of a VM, and its build (split, static part,
 * dynamic nodes) with vm->bind's shapes bound. */
kiln_status kiln_vm_init_io(kiln_vm *vm, kiln_error *err);
kiln_status kiln_vm_build(kiln_vm *vm, const kiln_vm_options *o, kiln_error *err);
/* The graph split (vm.c): dyn[i] set for the dynamic nodes of vm->graph,
 * vm->sg the static part's graph (NULL: none). kiln_vm_build_dynamic sets up
 * the nodes with dyn[i] set, after the static part's inputs and outputs
 * (s_n_in, s_in_map, s_n_out, s_out_names) are known. */
kiln_status kiln_vm_split(kiln_vm *vm, bool *dyn, kiln_error *err);
kiln_status kiln_vm_build_dynamic(kiln_vm *vm, const bool *dyn, kiln_error *err);
/* The outermost VM (vm itself unless a body's). */
kiln_vm *kiln_vm_root(const kiln_vm *vm);
/* The pack memo of vm's model (struct kiln_vm's memo), NULL when out of
 * memory or without a decoded model. */
struct kiln_pack_memo *kiln_vm_memo(kiln_vm *vm);
/* Destroys vm's memo when it owns it (kiln_vm_destroy). */
void kiln_vm_memo_free(kiln_vm *vm);
/* Copies o's settings into vm (strings duplicated); KILN_ERR_OUT_OF_MEMORY. */
kiln_status kiln_vm_copy_options(kiln_vm *vm, const kiln_vm_options *o);

/* vm_symbolic.c: whether t fits input i's declared dtype, rank and fixed dims
 * (errors name the input and dim); makes vm->active the specialization of the
 * inputs' current shapes (created for a new class, VM_SPECS kept). */
kiln_status kiln_vm_check_input(const kiln_vm *vm, int i, const kiln_tensor *t, kiln_error *err);
kiln_status kiln_vm_spec_select(kiln_vm *vm, kiln_error *err);
/* The specialization of input shapes `shapes` (created when new, the least
 * recently used one replaced when VM_SPECS are kept); batch_c > 0 builds it
 * as a chunk of that extent, refused (KILN_ERR_UNSUPPORTED) unless its
 * graph keeps the items apart; probe: import and check only, *out NULL. */
kiln_status kiln_vm_spec_get(kiln_vm *g, const kiln_shape *shapes, int64_t batch_c, bool probe,
                             kiln_vm **out, kiln_error *err);
/* vm_batch.c: plans the current inputs' run as chunks (vm->n_chunk > 0) when
 * the model is a symbolic batch that keeps its items apart (decided at the
 * first run; vm->batch_why says why not); the checks of a chunk's graph,
 * called by kiln_vm_build after the split; the chunked steps and outputs. */
kiln_status kiln_vm_batch_plan(kiln_vm *vm, kiln_error *err);
kiln_status kiln_vm_batch_check(kiln_vm *vm, const bool *dyn, kiln_error *err);
int kiln_vm_batch_num_steps(const kiln_vm *vm);
kiln_status kiln_vm_batch_step_info(const kiln_vm *vm, int i, kiln_vm_step_desc *info,
                                    char *shapes, size_t size);
kiln_status kiln_vm_batch_run_step(kiln_vm *vm, int i, kiln_error *err);
void kiln_vm_batch_free(kiln_vm *vm);

/* vm_flow.c: sets up dynamic node d of vm when it is If, Loop or Scan (its
 * bodies and captured sources); runs it. */
bool kiln_vm_flow_op(const char *op_type);
kiln_status kiln_vm_flow_prepare(kiln_vm *vm, int d, kiln_error *err);
kiln_status kiln_vm_flow_run(kiln_vm *vm, int d, kiln_error *err);
void kiln_vm_flow_free(vm_node *n);

/* vm_seq.c: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
 * SequenceAt, SequenceLength, ConcatFromSequence, SplitToSequence. */
bool kiln_vm_seq_op(const char *op_type);
/* Makes the node's own output k hold `bytes` (grown, never shrunk). */
bool kiln_vm_reserve(vm_node *n, int k, size_t bytes);
kiln_status kiln_vm_seq_run(kiln_vm *vm, vm_node *n, kiln_error *err);
void kiln_vm_seq_free(vm_node *n);

/* vm_kernels.c: NonZero, Compress, NonMaxSuppression and TopK run by the VM
 * itself on run-time values, outputs in the node's own buffers. */
bool kiln_vm_kernel_op(const char *op_type);
kiln_status kiln_vm_kernel_run(kiln_vm *vm, vm_node *n, kiln_error *err);
/* Helpers of the VM's nodes: the model's ai.onnx opset; attribute `name`
 * of np (NULL: absent); the
 * node's scratch memory, at least `bytes` (grown, never shrunk; NULL: out
 * of memory); output k as (dtype, shape), its data reserved. */
int64_t kiln_vm_opset(const kiln_vm *vm);
const Onnx__AttributeProto *kiln_vm_attr(const Onnx__NodeProto *np, const char *name);
void *kiln_vm_scratch(vm_node *n, size_t bytes);
kiln_status kiln_vm_set_out(vm_node *n, int k, kiln_dtype dt, const kiln_shape *sh,
                            kiln_error *err);
/* vm_scatter.c: ScatterElements (its data updated in place when the VM
 * holds the only reference; an Expand feeding its indices read unexpanded)
 * and ConstantOfShape on run-time values. kiln_vm_scatter_plan marks such
 * Expands fused, once the readers are known. */
void kiln_vm_scatter_plan(kiln_vm *vm);
kiln_status kiln_vm_scatter_run(kiln_vm *vm, vm_node *n, kiln_error *err);
kiln_status kiln_vm_fill_run(vm_node *n, const kiln_tensor *shape, kiln_error *err);
/* String attribute `name` of the node, copied into buf (def when absent). */
const char *kiln_vm_attr_str(const vm_node *n, const char *name, const char *def, char *buf,
                             size_t cap);
/* vm_view.c: Identity, Flatten, Reshape, Squeeze, Unsqueeze and a Cast to
 * the same dtype as views of their input (no copy); *done false when the
 * node is not one on these inputs (the caller converts it). */
bool kiln_vm_view_op(const char *op_type);
kiln_status kiln_vm_view_run(kiln_vm *vm, vm_node *n, bool *done, kiln_error *err);
/* vm_roialign.c: RoiAlign on the run-time rois (float32 split over the
 * static part's threads). */
kiln_status kiln_vm_roialign_run(const kiln_vm *vm, vm_node *n, const kiln_tensor *const *in,
                                 kiln_error *err);

#endif

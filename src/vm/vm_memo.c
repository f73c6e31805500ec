/* vm/vm_memo.c: the pack memo of a VM's model (util/packmemo.h): the
 * weights files an earlier shape class packed, which the next class's
 * build maps instead of packing (vm.c's compile_graph hands it to the
 * graph). The VM that owns the decoded model creates it with its first
 * compile, its initializers' bytes the stable sources; a specialization
 * gets its generic VM's (vm_symbolic.c). */
#include "util/packmemo.h"
#include "vm/vm_internal.h"

kiln_pack_memo *kiln_vm_memo(kiln_vm *vm)
{
    kiln_vm *r = kiln_vm_root(vm);
    if (r->memo || r->borrowed_m || !r->m || !r->m->graph)
        return r->memo;
    /* the decoded initializers live, unchanged, as long as this VM */
    r->memo = kiln_pack_memo_create();
    r->memo_owned = true;
    for (size_t i = 0; r->memo && i < r->m->graph->n_initializer; i++) {
        const Onnx__TensorProto *tp = r->m->graph->initializer[i];
        if (tp->has_raw_data &&
            !kiln_pack_memo_add_source(r->memo, tp->raw_data.data, tp->raw_data.len)) {
            kiln_pack_memo_destroy(r->memo);
            r->memo = NULL; /* out of memory: every class packs */
        }
    }
    return r->memo;
}

void kiln_vm_memo_free(kiln_vm *vm)
{
    if (vm->memo_owned)
        kiln_pack_memo_destroy(vm->memo);
    vm->memo = NULL;
    vm->memo_owned = false;
}

/* ir/batch_axis.h: whether a graph computes each item of its batch on its
 * own (docs/VM.md, "Symbolic batch: chunks").
 *
 * A model whose only symbolic input dim is the batch (axis 0), exported
 * from PyTorch with dynamic_axes {0: "batch"}, usually computes item i of
 * every output from item i of the inputs alone. Such a model can run a
 * batch of any extent as chunks of the extents it was compiled for. This
 * analysis decides it from the graph, imported with the batch bound to a
 * concrete extent c: the batch is axis 0 of the marked inputs, every node
 * must keep it at axis 0 without mixing items, and every graph output must
 * carry it. It is conservative: an op without a rule here refuses.
 */
#ifndef KILN_IR_BATCH_AXIS_H
#define KILN_IR_BATCH_AXIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"

/* True when g (row-major, shapes inferred) computes each of the c items
 * along axis 0 of the graph inputs with batched[i] set on its own, and
 * every graph output has that axis first. With c = 1 only the outputs are
 * checked (one item is always apart, and extents of 1 do not show where a
 * batch would be). When false, `why` (may be NULL) names the node and the
 * reason. */
bool kiln_graph_batch_separable(const kiln_graph *g, const bool *batched, int64_t c, char *why,
                                size_t why_size);

#endif

/* ref/movement.c: STUB file: to be written. */
#include "ir/graph.h"
#include "util/error.h"

/* STUB */
kiln_status kiln_ref_tile(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_expand(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_gather_elements(const kiln_node *n, const kiln_tensor *const *in,
                                     kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_gather_nd(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_scatter_elements(const kiln_node *n, const kiln_tensor *const *in,
                                      kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_scatter_nd(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_depth_to_space(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_space_to_depth(const kiln_node *n, const kiln_tensor *const *in,
                                    kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_trilu(const kiln_node *n, const kiln_tensor *const *in,
                           kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_onehot(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_ref_reverse_sequence(const kiln_node *n, const kiln_tensor *const *in,
                                      kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}


/* ir/infer_movement.c: STUB file: to be written. */
#include "ir/graph.h"
#include "util/error.h"

/* STUB */
kiln_status kiln_infer_tile(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_expand(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_gather_elements(const kiln_node *n, const kiln_value *const *in,
                                       kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_gather_nd(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_scatter(const kiln_node *n, const kiln_value *const *in,
                               kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_depth_to_space(const kiln_node *n, const kiln_value *const *in,
                                      kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_space_to_depth(const kiln_node *n, const kiln_value *const *in,
                                      kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_trilu(const kiln_node *n, const kiln_value *const *in,
                             kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_onehot(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}

/* STUB */
kiln_status kiln_infer_reverse_sequence(const kiln_node *n, const kiln_value *const *in,
                                        kiln_value *const *out, kiln_error *err)
{
    (void)n;
    (void)in;
    (void)out;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "not implemented yet");
}


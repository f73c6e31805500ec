/* lower/knobs.c: knob spaces and their analytic defaults (knobs.h).
 *
 * Task-splitting knobs aim for >= 8 tasks (4 per thread on the 2-core
 * machines this targets) of >= ~32K multiply-adds each, so one fork-join per
 * op amortizes; the dense template's register tile is mr rows x nb columns
 * (nb = one or two vectors), mr chosen so mr*nb/vec accumulators plus the
 * loaded panel fit the 32 (AVX-512) or 16 (AVX2) vector registers. */
#include <string.h>

#include "codegen/c/kernels/kiln_kernels_conv.h"
#include "codegen/c/kernels/kiln_kernels_dwconv.h"
#include "lower/knobs.h"

static kiln_knob *add_knob(kiln_task *t, const char *name, int value)
{
    if (t->n_knobs >= KILN_MAX_KNOBS)
        return NULL;
    kiln_knob *k = &t->knobs[t->n_knobs++];
    memset(k, 0, sizeof *k);
    k->name = name;
    k->value = value;
    return k;
}

static void choice(kiln_knob *k, int v)
{
    if (!k || k->n_choices >= KILN_KNOB_MAX_CHOICES)
        return;
    for (int i = 0; i < k->n_choices; i++)
        if (k->choices[i] == v)
            return;
    k->choices[k->n_choices++] = v;
}

/* 0 ("all"), then powers of two up to `max`, and the default. */
static void pow2_choices(kiln_knob *k, int max, bool zero)
{
    if (zero)
        choice(k, 0);
    for (int v = 1; v <= max && k && k->n_choices < KILN_KNOB_MAX_CHOICES - 1; v *= 2)
        choice(k, v);
    if (k) {
        int def = k->value;
        k->n_choices = k->n_choices < KILN_KNOB_MAX_CHOICES ? k->n_choices : KILN_KNOB_MAX_CHOICES - 1;
        choice(k, def);
    }
}

void kiln_knobs_conv_nchwc(kiln_task *t, const void *params)
{
    const kiln_conv_params *p = params;
    kiln_conv_plan q = kiln_conv_plan_of(p);
    kiln_knob *k = add_knob(t, "ow_tile", p->ow_tile);
    int max_o = (int)(q.cob_g < KILN_CONV_MAXO ? q.cob_g : KILN_CONV_MAXO);
    for (int v = 1; v <= kiln_conv_max_t(q.isa, 1) && v <= p->ow; v++)
        choice(k, v);
    choice(k, p->ow_tile);
    k = add_knob(t, "oc_tile", p->oc_tile);
    for (int v = 1; v <= max_o; v++)
        choice(k, v);
    choice(k, p->oc_tile);
    k = add_knob(t, "ic_tile", p->ic_tile);
    pow2_choices(k, (int)q.cib_g, true);
    k = add_knob(t, "loop_order", p->loop_order);
    choice(k, 0);
    choice(k, 1);
    k = add_knob(t, "oh_tile", p->oh_tile);
    pow2_choices(k, p->oh, true);
    k = add_knob(t, "oc_group", p->oc_group);
    pow2_choices(k, (int)q.cob_g, true);
}

void kiln_knobs_apply_conv(const kiln_task *t, void *params)
{
    kiln_conv_params *p = params;
    for (int i = 0; i < t->n_knobs; i++) {
        const kiln_knob *k = &t->knobs[i];
        if (!strcmp(k->name, "ow_tile"))
            p->ow_tile = k->value;
        else if (!strcmp(k->name, "oc_tile"))
            p->oc_tile = k->value;
        else if (!strcmp(k->name, "ic_tile"))
            p->ic_tile = k->value;
        else if (!strcmp(k->name, "loop_order"))
            p->loop_order = k->value;
        else if (!strcmp(k->name, "oh_tile"))
            p->oh_tile = k->value;
        else if (!strcmp(k->name, "oc_group"))
            p->oc_group = k->value;
    }
}

void kiln_knobs_dwconv(kiln_task *t, const void *params)
{
    const kiln_dwconv_params *p = params;
    kiln_knob *k = add_knob(t, "ow_tile", p->ow_tile);
    for (int v = 1; v <= KILN_DWCONV_MAXT && v <= p->ow; v++)
        choice(k, v);
    choice(k, p->ow_tile);
    k = add_knob(t, "oh_tile", p->oh_tile);
    pow2_choices(k, p->oh, true);
}

void kiln_knobs_apply_dwconv(const kiln_task *t, void *params)
{
    kiln_dwconv_params *p = params;
    for (int i = 0; i < t->n_knobs; i++) {
        if (!strcmp(t->knobs[i].name, "ow_tile"))
            p->ow_tile = t->knobs[i].value;
        else if (!strcmp(t->knobs[i].name, "oh_tile"))
            p->oh_tile = t->knobs[i].value;
    }
}

void kiln_knobs_rows(kiln_task *t, int64_t outer, int64_t rows, int64_t work_per_row)
{
    int64_t target_tasks = 8, min_work = 32768;
    int rpt = 1;
    while (rpt * 2 <= rows && outer * ((rows + rpt * 2 - 1) / (rpt * 2)) >= target_tasks &&
           rpt * work_per_row < min_work)
        rpt *= 2;
    kiln_knob *k = add_knob(t, "rows_per_task", rpt);
    pow2_choices(k, (int)(rows < 64 ? rows : 64), false);
}

void kiln_knobs_dense(kiln_task *t, const kiln_dense *d, const kiln_target *tg)
{
    int vec = tg->vec;
    int regs = tg->isa == KILN_TARGET_AVX512 ? 32 : 16;
    int nb = d->N >= 2 * vec && d->M >= 4 ? 2 * vec : vec;
    int mr = 1;
    while (mr * 2 <= 8 && mr * 2 <= d->M && (mr * 2) * (nb / vec) + nb / vec + 1 <= regs)
        mr *= 2;
    if (d->M >= 6 && 6 * (nb / vec) + nb / vec + 1 <= regs && nb == vec)
        mr = 6;
    kiln_knob *k = add_knob(t, "mr", mr);
    choice(k, 1);
    choice(k, 2);
    choice(k, 4);
    choice(k, 6);
    choice(k, 8);
    k = add_knob(t, "nb", nb);
    choice(k, vec);
    choice(k, 2 * vec);
    int64_t panels = (d->N + nb - 1) / nb, mtiles = (d->M + mr - 1) / mr;
    int ppt = 1;
    while (ppt * 2 <= panels && mtiles * ((panels + ppt * 2 - 1) / (ppt * 2)) >= 8 &&
           (int64_t)ppt * nb * d->K * mr < 65536)
        ppt *= 2;
    k = add_knob(t, "panels", ppt);
    pow2_choices(k, (int)(panels < 64 ? panels : 64), false);
}

void kiln_knobs_chunk(kiln_task *t, int64_t total)
{
    int chunk = 4096;
    while (chunk < 65536 && total / (chunk * 2) >= 8)
        chunk *= 2;
    kiln_knob *k = add_knob(t, "chunk", chunk);
    for (int v = 1024; v <= 65536; v *= 2)
        choice(k, v);
}

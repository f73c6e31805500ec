/* lower/knobs.c: building knob spaces (knobs.h), and the two generic
 * task-splitting knobs many templates share.
 *
 * Task-splitting knobs aim for >= 8 tasks (4 per thread on the 2-core
 * machines this targets) of >= ~32K multiply-adds each, so one fork-join per
 * op amortizes. */
#include <string.h>

#include "lower/knobs.h"

kiln_knob *kiln_knob_add(kiln_task *t, const char *name, kiln_knob_kind kind, int value,
                         int offset)
{
    if (t->n_knobs >= KILN_MAX_KNOBS)
        return NULL;
    kiln_knob *k = &t->knobs[t->n_knobs++];
    memset(k, 0, sizeof *k);
    k->name = name;
    k->kind = kind;
    k->value = value;
    k->offset = offset;
    return k;
}

void kiln_knob_choice(kiln_knob *k, int v)
{
    if (!k || k->n_choices >= KILN_KNOB_MAX_CHOICES)
        return;
    for (int i = 0; i < k->n_choices; i++)
        if (k->choices[i] == v)
            return;
    k->choices[k->n_choices++] = v;
}

void kiln_knob_pow2(kiln_knob *k, int max, bool zero)
{
    if (zero)
        kiln_knob_choice(k, 0);
    for (int v = 1; v <= max && k && k->n_choices < KILN_KNOB_MAX_CHOICES - 1; v *= 2)
        kiln_knob_choice(k, v);
    if (k) {
        int def = k->value;
        k->n_choices = k->n_choices < KILN_KNOB_MAX_CHOICES ? k->n_choices : KILN_KNOB_MAX_CHOICES - 1;
        kiln_knob_choice(k, def);
    }
}

void kiln_knobs_rows(kiln_task *t, int64_t outer, int64_t rows, int64_t work_per_row)
{
    int64_t target_tasks = 8, min_work = 32768;
    int rpt = 1;
    while (rpt * 2 <= rows && outer * ((rows + rpt * 2 - 1) / (rpt * 2)) >= target_tasks &&
           rpt * work_per_row < min_work)
        rpt *= 2;
    kiln_knob *k = kiln_knob_add(t, "rows_per_task", KILN_KNOB_TILE, rpt, -1);
    kiln_knob_pow2(k, (int)(rows < 64 ? rows : 64), false);
}

void kiln_knobs_chunk(kiln_task *t, int64_t total)
{
    int chunk = 4096;
    while (chunk < 65536 && total / (chunk * 2) >= 8)
        chunk *= 2;
    kiln_knob *k = kiln_knob_add(t, "chunk", KILN_KNOB_TILE, chunk, -1);
    for (int v = 1024; v <= 65536; v *= 2)
        kiln_knob_choice(k, v);
}

bool kiln_knob_pick(kiln_task *t, const void *params)
{
    if (t->n_picks >= KILN_MAX_PICKS)
        return false;
    int v[KILN_MAX_KNOBS];
    bool other = false;
    for (int i = 0; i < t->n_knobs; i++) {
        const kiln_knob *k = &t->knobs[i];
        v[i] = k->value;
        if (k->offset >= 0)
            memcpy(&v[i], (const char *)params + k->offset, sizeof(int));
        other = other || v[i] != k->value;
    }
    if (!other)
        return false;
    for (int j = 0; j < t->n_picks; j++)
        if (!memcmp(t->picks[j], v, sizeof(int) * (size_t)t->n_knobs))
            return false;
    for (int i = 0; i < t->n_knobs; i++) {
        const kiln_knob *k = &t->knobs[i];
        bool have = false;
        for (int c = 0; c < k->n_choices && !have; c++)
            have = k->choices[c] == v[i];
        if (!have && k->n_choices >= KILN_KNOB_MAX_CHOICES)
            return false; /* no room for the value: not a configuration of the space */
    }
    for (int i = 0; i < t->n_knobs; i++)
        kiln_knob_choice(&t->knobs[i], v[i]);
    memcpy(t->picks[t->n_picks++], v, sizeof(int) * (size_t)t->n_knobs);
    return true;
}

void kiln_tiles_rank(kiln_tile_rank *r, int n)
{
    for (int i = 1; i < n; i++) { /* insertion: stable, and n is a few dozen */
        kiln_tile_rank x = r[i];
        int j = i;
        for (; j > 0 && r[j - 1].cost > x.cost; j--)
            r[j] = r[j - 1];
        r[j] = x;
    }
}

void kiln_knobs_apply(kiln_task *t)
{
    if (!t->params)
        return;
    for (int i = 0; i < t->n_knobs; i++)
        if (t->knobs[i].offset >= 0)
            memcpy((char *)t->params + t->knobs[i].offset, &t->knobs[i].value, sizeof(int));
}

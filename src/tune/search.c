/* tune/search.c: which configurations to measure next, and when a
 * challenger beats the incumbent (docs/TUNING.md, "Search" and
 * "Measurement").
 *
 * Droplet search (coordinate descent from the analytic default): the
 * candidates are the incumbent with one knob moved to the neighbouring
 * choice (distance 1 in the template's order of choices), knob by knob;
 * when every such neighbour has been measured the distance grows (2, 3, ...)
 * and after the largest distance, pairs of knobs move together by 1. A new
 * incumbent resets the distance to 1. The genetic search (ga) breeds from
 * the fastest configurations measured so far, each time paired against the
 * incumbent of its batch: two parents by binary tournament, uniform
 * crossover, then each tunable knob mutated with probability 1/n (half
 * the time to a neighbouring choice, half to any). Random and grid are
 * baselines: uniform draws from the space, and the space in mixed-radix
 * order.
 *
 * The acceptance rule compares medians of samples taken interleaved in the
 * same batch: median(c) < median(i) - max(2% x median(i), 2 x max(MAD(i),
 * MAD(c))). The best of many noisy samples is biased low; the median of
 * interleaved samples with a noise margin is not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double kiln_tune_median(const double *v, int n)
{
    if (n <= 0)
        return 0;
    double *c = malloc(sizeof *c * (size_t)n);
    if (!c)
        return v[0];
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

double kiln_tune_mad(const double *v, int n)
{
    if (n <= 1)
        return 0;
    double m = kiln_tune_median(v, n);
    double *d = malloc(sizeof *d * (size_t)n);
    if (!d)
        return 0;
    for (int k = 0; k < n; k++)
        d[k] = fabs(v[k] - m);
    double r = kiln_tune_median(d, n);
    free(d);
    return r;
}

bool kiln_tune_beats(const kiln_trial *c, const kiln_trial *i)
{
    if (c->status != KILN_TRIAL_OK || c->n_samples == 0)
        return false;
    if (i->status != KILN_TRIAL_OK || i->n_samples == 0)
        return true;
    double mc = kiln_tune_median(c->samples_us, c->n_samples);
    double mi = kiln_tune_median(i->samples_us, i->n_samples);
    double mad = fmax(kiln_tune_mad(c->samples_us, c->n_samples),
                      kiln_tune_mad(i->samples_us, i->n_samples));
    if (!(mc < mi - fmax(0.02 * mi, 2 * mad)))
        return false;
    if (c->n_rounds >= 2 && c->n_rounds == i->n_rounds) {
        double ratio[KILN_TUNE_MAX_SAMPLES];
        int n = 0;
        for (int k = 0; k < c->n_rounds && k < KILN_TUNE_MAX_SAMPLES; k++)
            if (c->round_us[k] > 0 && i->round_us[k] > 0)
                ratio[n++] = c->round_us[k] / i->round_us[k];
        if (n >= 2 && !(kiln_tune_median(ratio, n) < 0.98))
            return false;
    }
    return true;
}

int kiln_tune_drop_slow_requests(kiln_trial *t, const int *req_len, int n_req)
{
    double med[KILN_TUNE_MAX_SAMPLES];
    int total = 0, n = 0;
    for (int r = 0; r < n_req && n < KILN_TUNE_MAX_SAMPLES; r++) {
        if (req_len[r] <= 0 || total + req_len[r] > t->n_samples)
            return 0; /* the lengths do not describe the samples: keep them all */
        med[n++] = kiln_tune_median(t->samples_us + total, req_len[r]);
        total += req_len[r];
    }
    if (n < 2 || total != t->n_samples)
        return 0;
    double fastest = med[0];
    for (int r = 1; r < n; r++)
        fastest = fmin(fastest, med[r]);
    int kept = 0, dropped = 0;
    for (int r = 0, at = 0; r < n; at += req_len[r], r++) {
        bool slow = med[r] > KILN_TUNE_SLOW_REQUEST * fastest;
        for (int k = 0; k < req_len[r]; k++) {
            double v = t->samples_us[at + k];
            if (!slow)
                t->samples_us[kept++] = v; /* kept <= at + k: read before written */
            else if (t->n_dropped < KILN_TUNE_MAX_SAMPLES)
                t->dropped_us[t->n_dropped++] = v;
        }
        dropped += slow;
    }
    t->n_samples = kept;
    return dropped;
}

bool kiln_tune_cfg_equal(const kiln_tune_cfg *a, const kiln_tune_cfg *b)
{
    if (a->n != b->n)
        return false;
    for (int k = 0; k < a->n; k++)
        if (a->v[k] != b->v[k])
            return false;
    return true;
}

int64_t kiln_tune_space_size(const kiln_tune_space *sp)
{
    int64_t s = 1;
    for (int k = 0; k < sp->n; k++)
        if (!sp->fixed[k] && sp->n_choices[k] > 1)
            s *= sp->n_choices[k];
    return s;
}

int kiln_tune_choice_index(const kiln_tune_space *sp, int k, int v)
{
    for (int c = 0; c < sp->n_choices[k]; c++)
        if (sp->choices[k][c] == v)
            return c;
    return -1;
}

bool kiln_tune_knob_tunable(const kiln_tune_space *sp, int k)
{
    return !sp->fixed[k] && sp->n_choices[k] > 1;
}

typedef struct pick {
    const kiln_tune_cfg *inc, *seen;
    int n_seen, want, n;
    kiln_tune_cfg *out;
} pick;

/* Adds c unless seen, the incumbent or picked already; true when full. */
static bool offer(pick *p, const kiln_tune_cfg *c)
{
    if (p->n >= p->want)
        return true;
    if (kiln_tune_cfg_equal(c, p->inc))
        return false;
    for (int k = 0; k < p->n_seen; k++)
        if (kiln_tune_cfg_equal(c, &p->seen[k]))
            return false;
    for (int k = 0; k < p->n; k++)
        if (kiln_tune_cfg_equal(c, &p->out[k]))
            return false;
    p->out[p->n++] = *c;
    return p->n >= p->want;
}

/* The incumbent with knob k moved by d choices; false when out of range. */
static bool moved(const kiln_tune_space *sp, const kiln_tune_cfg *inc, int k, int d,
                  kiln_tune_cfg *c)
{
    int i = kiln_tune_choice_index(sp, k, inc->v[k]);
    if (i < 0 || i + d < 0 || i + d >= sp->n_choices[k])
        return false;
    *c = *inc;
    c->v[k] = sp->choices[k][i + d];
    return true;
}

static int droplet(const kiln_tune_space *sp, kiln_tune_search *st, pick *p)
{
    int maxr = 1;
    for (int k = 0; k < sp->n; k++)
        if (kiln_tune_knob_tunable(sp, k) && sp->n_choices[k] - 1 > maxr)
            maxr = sp->n_choices[k] - 1;
    if (st->radius < 1)
        st->radius = 1;
    for (; st->radius <= maxr && p->n == 0; st->radius++) {
        for (int k = 0; k < sp->n; k++) {
            if (!kiln_tune_knob_tunable(sp, k))
                continue;
            kiln_tune_cfg c;
            for (int s = -1; s <= 1; s += 2)
                if (moved(sp, p->inc, k, s * st->radius, &c) && offer(p, &c))
                    return p->n;
        }
        if (p->n)
            return p->n; /* the same radius again next time */
    }
    if (p->n)
        return p->n;
    st->radius = maxr + 1;
    /* pairs of knobs, each moved by 1 */
    for (int a = 0; a < sp->n; a++)
        for (int b = a + 1; b < sp->n; b++) {
            if (!kiln_tune_knob_tunable(sp, a) || !kiln_tune_knob_tunable(sp, b))
                continue;
            for (int da = -1; da <= 1; da += 2)
                for (int db = -1; db <= 1; db += 2) {
                    kiln_tune_cfg c1, c2;
                    if (moved(sp, p->inc, a, da, &c1) && moved(sp, &c1, b, db, &c2) &&
                        offer(p, &c2))
                        return p->n;
                }
        }
    return p->n;
}

static uint64_t next_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int random_pick(const kiln_tune_space *sp, kiln_tune_search *st, pick *p)
{
    for (int tries = 0; tries < 200 * p->want && p->n < p->want; tries++) {
        kiln_tune_cfg c = sp->deflt;
        for (int k = 0; k < sp->n; k++)
            if (kiln_tune_knob_tunable(sp, k))
                c.v[k] = sp->choices[k][next_rand(&st->rng) % (uint64_t)sp->n_choices[k]];
        offer(p, &c);
    }
    return p->n;
}

static int grid_pick(const kiln_tune_space *sp, kiln_tune_search *st, pick *p)
{
    uint64_t total = (uint64_t)kiln_tune_space_size(sp);
    for (; st->grid < total && p->n < p->want; st->grid++) {
        kiln_tune_cfg c = sp->deflt;
        uint64_t x = st->grid;
        for (int k = 0; k < sp->n; k++)
            if (kiln_tune_knob_tunable(sp, k)) {
                c.v[k] = sp->choices[k][x % (uint64_t)sp->n_choices[k]];
                x /= (uint64_t)sp->n_choices[k];
            }
        offer(p, &c);
    }
    return p->n;
}

void kiln_tune_observe(kiln_tune_search *st, const kiln_tune_cfg *c, double rel)
{
    if (!(rel > 0))
        return;
    int at = -1;
    for (int k = 0; k < st->n_elite && at < 0; k++)
        if (kiln_tune_cfg_equal(&st->elite[k], c))
            at = k;
    if (at < 0 && st->n_elite < KILN_TUNE_ELITE)
        at = st->n_elite++;
    if (at < 0) { /* full: replace the slowest when faster */
        at = 0;
        for (int k = 1; k < st->n_elite; k++)
            if (st->elite_rel[k] > st->elite_rel[at])
                at = k;
        if (rel >= st->elite_rel[at])
            return;
    }
    st->elite[at] = *c;
    st->elite_rel[at] = rel;
}

/* Binary tournament: the faster of two elite members drawn at random. */
static const kiln_tune_cfg *tournament(kiln_tune_search *st)
{
    int a = (int)(next_rand(&st->rng) % (uint64_t)st->n_elite);
    int b = (int)(next_rand(&st->rng) % (uint64_t)st->n_elite);
    return &st->elite[st->elite_rel[b] < st->elite_rel[a] ? b : a];
}

static int ga_pick(const kiln_tune_space *sp, kiln_tune_search *st, pick *p)
{
    int tun[KILN_TUNE_MAX_KNOBS], nt = 0;
    for (int k = 0; k < sp->n; k++)
        if (kiln_tune_knob_tunable(sp, k))
            tun[nt++] = k;
    if (nt == 0)
        return 0;
    for (int tries = 0; st->n_elite >= 2 && tries < 100 * p->want && p->n < p->want; tries++) {
        const kiln_tune_cfg *a = tournament(st), *b = tournament(st);
        kiln_tune_cfg c = *a;
        for (int j = 0; j < nt; j++)
            if (next_rand(&st->rng) & 1)
                c.v[tun[j]] = b->v[tun[j]];
        for (int j = 0; j < nt; j++) {
            int k = tun[j];
            if (next_rand(&st->rng) % (uint64_t)nt)
                continue;
            int i = kiln_tune_choice_index(sp, k, c.v[k]);
            uint64_t r = next_rand(&st->rng);
            if (i >= 0 && (r & 1)) {
                int d = (r & 2) ? 1 : -1;
                if (i + d < 0 || i + d >= sp->n_choices[k])
                    d = -d;
                if (i + d >= 0 && i + d < sp->n_choices[k])
                    c.v[k] = sp->choices[k][i + d];
            } else {
                c.v[k] = sp->choices[k][(r >> 2) % (uint64_t)sp->n_choices[k]];
            }
        }
        offer(p, &c);
    }
    /* fewer than two parents, or their offspring all measured: draws */
    if (p->n < p->want)
        random_pick(sp, st, p);
    return p->n;
}

int kiln_tune_next(const kiln_tune_space *sp, const char *tuner, kiln_tune_search *st,
                   const kiln_tune_cfg *incumbent, const kiln_tune_cfg *seen, int n_seen,
                   int want, kiln_tune_cfg *out)
{
    pick p = {incumbent, seen, n_seen, want, 0, out};
    if (want <= 0)
        return 0;
    if (tuner && !strcmp(tuner, "random"))
        return random_pick(sp, st, &p);
    if (tuner && !strcmp(tuner, "grid"))
        return grid_pick(sp, st, &p);
    if (tuner && !strcmp(tuner, "ga"))
        return ga_pick(sp, st, &p);
    return droplet(sp, st, &p);
}

/* tune/model.c: a template's cost model over a task's space, corrected
 * online (docs/TUNING.md, "The cost model").
 *
 * Ranking. Every configuration of the space (the tunable knobs; the block
 * knobs stay the default's) is evaluated by the template's model
 * (kiln_workload_cost); when the space holds more than MAX_ENUM (262,144),
 * only the configurations that differ from the default in at most two
 * knobs are. Each is kept (its knobs' choice indices, a byte each, and the
 * log of its predicted time relative to the default's: 262,144
 * configurations of 7 knobs take 2.75 MB).
 *
 * Correction. Each configuration measured gives y = ln(its time relative to
 * the default's, paired as kiln_tune_observe's), with the features
 * x0 = ln(predicted relative time) and, per tunable knob k, x_k = how many
 * choices it sits from the default's value. The fit is
 *     y ~ b x0 + sum_k c_k x_k
 * by ridge regression pulled towards the uncorrected model (b = 1, c = 0,
 * weight LAMBDA each): a model that overrates a knob learns a cost for
 * moving it, one that is right keeps its ranking. The corrected prediction
 * is exp(b x0 + sum_k c_k x_k).
 *
 * Proposal. The configurations not measured yet whose corrected prediction
 * beats the incumbent's relative time by more than the acceptance rule's
 * 2% margin, best first: the whole kept space is ranked again by the
 * corrected model at each call. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"

#define MAX_ENUM (1 << 18)
#define PROPOSE 16 /* proposals per call, at most */
#define MAX_OBS 512
#define LAMBDA 1.0
#define MARGIN 0.98

struct kiln_tune_model {
    const kiln_tune_space *sp;
    kiln_tune_cost_fn cost;
    void *ctx;
    double def_cost;
    int nt;                          /* tunable knobs */
    int knob_of[KILN_TUNE_MAX_KNOBS]; /* tunable knob j -> knob; feature j + 1 */
    int def_idx[KILN_TUNE_MAX_KNOBS]; /* the default's choice index of tunable knob j */
    /* every configuration evaluated: its tunable knobs' choice indices
     * (n_cfg x nt) and ln(its cost over the default's) */
    int64_t n_cfg, cap_cfg;
    uint8_t *cfg_idx;
    float *ln_pred;
    int default_rank;  /* 1-based place of the default by the model alone */
    double best_pred;  /* the model's best, relative to the default */
    int n_obs;
    double *obs_x; /* n_obs x (1 + nt) */
    double *obs_y;
    double w[KILN_TUNE_MAX_KNOBS + 1];
};

/* Predicted cost of c relative to the default's; 0 when the model fails. */
static double predict(const kiln_tune_model *m, const kiln_tune_cfg *c)
{
    double v;
    if (!m->cost(m->ctx, c->v, &v) || !(v > 0))
        return 0;
    return v / m->def_cost;
}

/* The configuration of tunable choice indices idx (the default elsewhere). */
static kiln_tune_cfg cfg_at(const kiln_tune_model *m, const uint8_t *idx)
{
    kiln_tune_cfg c = m->sp->deflt;
    for (int j = 0; j < m->nt; j++)
        c.v[m->knob_of[j]] = m->sp->choices[m->knob_of[j]][idx[j]];
    return c;
}

/* Stores configuration idx with the model's prediction. */
static bool consider(kiln_tune_model *m, const int *idx)
{
    uint8_t b[KILN_TUNE_MAX_KNOBS];
    for (int j = 0; j < m->nt; j++)
        b[j] = (uint8_t)idx[j];
    kiln_tune_cfg c = cfg_at(m, b);
    double r = predict(m, &c);
    if (!(r > 0))
        return true; /* the model has nothing for it: never proposed */
    if (m->n_cfg == m->cap_cfg) {
        int64_t cap = m->cap_cfg ? 2 * m->cap_cfg : 1024;
        uint8_t *ci = realloc(m->cfg_idx, (size_t)(cap * (m->nt ? m->nt : 1)));
        if (ci)
            m->cfg_idx = ci;
        float *lp = realloc(m->ln_pred, sizeof *lp * (size_t)cap);
        if (lp)
            m->ln_pred = lp;
        if (!ci || !lp)
            return false;
        m->cap_cfg = cap;
    }
    memcpy(&m->cfg_idx[m->n_cfg * m->nt], b, (size_t)m->nt);
    m->ln_pred[m->n_cfg++] = (float)log(r);
    if (r < m->best_pred)
        m->best_pred = r;
    return true;
}

static bool enumerate(kiln_tune_model *m)
{
    const kiln_tune_space *sp = m->sp;
    const int nt = m->nt;
    const int *d = m->def_idx;
    int idx[KILN_TUNE_MAX_KNOBS];
    memcpy(idx, d, sizeof(int) * (size_t)nt);
    /* the default first */
    if (!consider(m, d))
        return false;
    if (kiln_tune_space_size(sp) <= MAX_ENUM) {
        int at[KILN_TUNE_MAX_KNOBS] = {0};
        for (;;) {
            bool is_default = true;
            for (int j = 0; j < nt; j++)
                is_default &= at[j] == d[j];
            if (!is_default && !consider(m, at))
                return false;
            int j = 0;
            while (j < nt && ++at[j] == sp->n_choices[m->knob_of[j]])
                at[j++] = 0;
            if (j == nt)
                return true;
        }
    }
    /* every configuration one or two knobs away from the default */
    for (int a = 0; a < nt; a++)
        for (int ia = 0; ia < sp->n_choices[m->knob_of[a]]; ia++) {
            if (ia == d[a])
                continue;
            idx[a] = ia;
            if (!consider(m, idx))
                return false;
            for (int b = a + 1; b < nt; b++) {
                for (int ib = 0; ib < sp->n_choices[m->knob_of[b]]; ib++) {
                    if (ib == d[b])
                        continue;
                    idx[b] = ib;
                    if (!consider(m, idx))
                        return false;
                }
                idx[b] = d[b];
            }
            idx[a] = d[a];
        }
    return true;
}

kiln_tune_model *kiln_tune_model_create(const kiln_tune_space *sp, kiln_tune_cost_fn cost,
                                        void *ctx)
{
    double dc;
    if (!sp || !cost || !cost(ctx, sp->deflt.v, &dc) || !(dc > 0))
        return NULL;
    kiln_tune_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->sp = sp;
    m->cost = cost;
    m->ctx = ctx;
    m->def_cost = dc;
    m->best_pred = 1.0;
    /* choice indices are bytes */
    _Static_assert(sizeof sp->choices[0] / sizeof sp->choices[0][0] <= 256, "choices per knob");
    for (int k = 0; k < sp->n; k++)
        if (kiln_tune_knob_tunable(sp, k)) {
            m->def_idx[m->nt] = kiln_tune_choice_index(sp, k, sp->deflt.v[k]);
            if (m->def_idx[m->nt] < 0) { /* a default outside its choices */
                free(m);
                return NULL;
            }
            m->knob_of[m->nt++] = k;
        }
    m->w[0] = 1.0;
    m->obs_x = malloc(sizeof *m->obs_x * MAX_OBS * (size_t)(m->nt + 1));
    m->obs_y = malloc(sizeof *m->obs_y * MAX_OBS);
    if (!m->obs_x || !m->obs_y || !enumerate(m)) {
        kiln_tune_model_destroy(m);
        return NULL;
    }
    /* the default's place: 1 + the configurations predicted cheaper */
    m->default_rank = 1;
    for (int64_t i = 1; i < m->n_cfg; i++)
        m->default_rank += m->ln_pred[i] < m->ln_pred[0];
    return m;
}

void kiln_tune_model_destroy(kiln_tune_model *m)
{
    if (!m)
        return;
    free(m->obs_x);
    free(m->obs_y);
    free(m->cfg_idx);
    free(m->ln_pred);
    free(m);
}

void kiln_tune_model_stats(const kiln_tune_model *m, kiln_tune_model_info *info)
{
    memset(info, 0, sizeof *info);
    if (!m)
        return;
    info->evaluated = m->n_cfg;
    info->default_rank = m->default_rank;
    info->best_pred = m->best_pred;
    info->observed = m->n_obs;
    info->b = m->w[0];
}

/* The features of a configuration into x[0..1 + nt): ln of the model's
 * prediction, then each tunable knob's distance in choices from the
 * default's. */
static void features_idx(const kiln_tune_model *m, double ln_pred, const uint8_t *idx, double *x)
{
    x[0] = ln_pred;
    for (int j = 0; j < m->nt; j++)
        x[1 + j] = abs((int)idx[j] - m->def_idx[j]);
}

/* The choice indices of c's tunable knobs; false when a value is not a
 * choice. */
static bool idx_of(const kiln_tune_model *m, const kiln_tune_cfg *c, uint8_t *idx)
{
    for (int j = 0; j < m->nt; j++) {
        int a = kiln_tune_choice_index(m->sp, m->knob_of[j], c->v[m->knob_of[j]]);
        if (a < 0)
            return false;
        idx[j] = (uint8_t)a;
    }
    return true;
}

/* Ridge regression of the observations towards w0 = (1, 0, ...). */
static void fit(kiln_tune_model *m)
{
    enum { D = KILN_TUNE_MAX_KNOBS + 1 };
    const int n = m->nt + 1;
    double a[D][D + 1];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j <= n; j++)
            a[i][j] = 0;
        a[i][i] = LAMBDA;
        a[i][n] = i == 0 ? LAMBDA : 0; /* lambda x w0 */
    }
    for (int o = 0; o < m->n_obs; o++) {
        const double *x = &m->obs_x[o * n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++)
                a[i][j] += x[i] * x[j];
            a[i][n] += x[i] * m->obs_y[o];
        }
    }
    /* Gauss-Jordan with partial pivoting (the matrix is positive definite) */
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c]))
                piv = r;
        if (fabs(a[piv][c]) < 1e-12)
            return; /* keep the last fit */
        if (piv != c)
            for (int j = 0; j <= n; j++) {
                double t = a[c][j];
                a[c][j] = a[piv][j];
                a[piv][j] = t;
            }
        for (int r = 0; r < n; r++) {
            if (r == c)
                continue;
            double f = a[r][c] / a[c][c];
            for (int j = c; j <= n; j++)
                a[r][j] -= f * a[c][j];
        }
    }
    for (int i = 0; i < n; i++)
        m->w[i] = a[i][n] / a[i][i];
}

void kiln_tune_model_observe(kiln_tune_model *m, const kiln_tune_cfg *c, double rel)
{
    uint8_t idx[KILN_TUNE_MAX_KNOBS];
    if (!m || !(rel > 0) || m->n_obs >= MAX_OBS || !idx_of(m, c, idx))
        return;
    double p = predict(m, c);
    if (!(p > 0))
        return;
    features_idx(m, log(p), idx, &m->obs_x[m->n_obs * (m->nt + 1)]);
    m->obs_y[m->n_obs++] = log(rel);
    fit(m);
}

static double corrected(const kiln_tune_model *m, double ln_pred, const uint8_t *idx)
{
    double x[KILN_TUNE_MAX_KNOBS + 1], y = 0;
    features_idx(m, ln_pred, idx, x);
    for (int j = 0; j <= m->nt; j++)
        y += m->w[j] * x[j];
    return exp(y);
}

double kiln_tune_model_predict(const kiln_tune_model *m, const kiln_tune_cfg *c)
{
    uint8_t idx[KILN_TUNE_MAX_KNOBS];
    if (!m || !idx_of(m, c, idx))
        return 0;
    double p = predict(m, c);
    return p > 0 ? corrected(m, log(p), idx) : 0;
}

static bool in_list(const kiln_tune_cfg *l, int n, const kiln_tune_cfg *c)
{
    for (int k = 0; k < n; k++)
        if (kiln_tune_cfg_equal(&l[k], c))
            return true;
    return false;
}

int kiln_tune_model_next(const kiln_tune_model *m, double inc_rel, const kiln_tune_cfg *inc,
                         const kiln_tune_cfg *seen, int n_seen, int want, kiln_tune_cfg *out)
{
    if (!m || want <= 0)
        return 0;
    if (want > PROPOSE)
        want = PROPOSE;
    double p[PROPOSE];
    int64_t which[PROPOSE];
    int n = 0;
    for (int64_t i = 0; i < m->n_cfg; i++) {
        const uint8_t *idx = &m->cfg_idx[i * m->nt];
        double q = corrected(m, m->ln_pred[i], idx);
        if (!(q < inc_rel * MARGIN) || (n == want && q >= p[n - 1]))
            continue;
        kiln_tune_cfg c = cfg_at(m, idx);
        if (kiln_tune_cfg_equal(&c, inc) || in_list(seen, n_seen, &c))
            continue;
        /* insertion by corrected prediction, ties in enumeration order */
        int at = n < want ? n++ : want - 1;
        while (at > 0 && p[at - 1] > q) {
            p[at] = p[at - 1];
            which[at] = which[at - 1];
            at--;
        }
        p[at] = q;
        which[at] = i;
    }
    for (int k = 0; k < n; k++)
        out[k] = cfg_at(m, &m->cfg_idx[which[k] * m->nt]);
    return n;
}

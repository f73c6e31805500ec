/* report/report_chrome.c: Chrome trace JSON (the Trace Event Format's
 * object form, viewable in Perfetto and chrome://tracing): one complete event
 * ("ph": "X") per kernel of the representative instrumented run (the run
 * whose wall time is the median), at its measured start and duration in
 * microseconds, on process 1 / thread 0 (the calling thread; the pool's
 * workers run inside the kernels). args carry the op, shapes, layouts, hash
 * and the kernel's median over all runs. The configuration goes to
 * "otherData". */
#include <math.h>

#include <cJSON.h>

#include "report/report.h"
#include "util/error.h"

#define add kiln_report_json_add

kiln_status kiln_report_write_chrome(FILE *f, const kiln_report *r, kiln_error *err)
{
    int ok = 1;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    cJSON *ev = cJSON_CreateArray();
    for (int i = 0; ev && i < r->n_steps; i++) {
        const kiln_report_step *s = &r->steps[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(ev, e)) {
            cJSON_Delete(e);
            ok = 0;
            break;
        }
        add(e, "name", cJSON_CreateString(s->name), &ok);
        add(e, "cat", cJSON_CreateString(s->op[0] ? s->op : "kernel"), &ok);
        add(e, "ph", cJSON_CreateString("X"), &ok);
        add(e, "ts", cJSON_CreateNumber(s->start_us), &ok);
        add(e, "dur", cJSON_CreateNumber(s->trace_us), &ok);
        add(e, "pid", cJSON_CreateNumber(1), &ok);
        add(e, "tid", cJSON_CreateNumber(0), &ok);
        cJSON *a = cJSON_CreateObject();
        if (a) {
            char h[24] = "";
            if (s->has_hash)
                snprintf(h, sizeof h, "%016llx", (unsigned long long)s->hash);
            add(a, "op", cJSON_CreateString(s->op), &ok);
            add(a, "shapes", cJSON_CreateString(s->shapes), &ok);
            add(a, "layouts", cJSON_CreateString(s->layouts), &ok);
            add(a, "hash", cJSON_CreateString(h), &ok);
            add(a, "duration_us", cJSON_CreateNumber(s->time_us), &ok);
            if (s->flops > 0 && s->time_us > 0)
                add(a, "gflops", cJSON_CreateNumber(s->flops / (s->time_us * 1e3)), &ok);
        }
        add(e, "args", a, &ok);
    }
    add(root, "traceEvents", ev, &ok);
    add(root, "displayTimeUnit", cJSON_CreateString("ms"), &ok);
    cJSON *od = cJSON_CreateObject();
    if (od) {
        const kiln_report_config *c = &r->cfg;
        add(od, "model", cJSON_CreateString(c->model ? c->model : ""), &ok);
        add(od, "executor", cJSON_CreateString(c->executor ? c->executor : ""), &ok);
        add(od, "threads", cJSON_CreateNumber(c->threads), &ok);
        add(od, "target", cJSON_CreateString(c->target ? c->target : ""), &ok);
        add(od, "build_id", cJSON_CreateString(c->build_id ? c->build_id : ""), &ok);
        add(od, "total_us", cJSON_CreateNumber(r->total_us), &ok);
        add(od, "sum_us", cJSON_CreateNumber(r->sum_us), &ok);
    }
    add(root, "otherData", od, &ok);
    return kiln_report_json_emit(f, root, ok, 0, err);
}

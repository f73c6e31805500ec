/* tune/fingerprint.c: what machine a tuning record was measured on, and
 * which template code it measured.
 *
 * The CPU fingerprint is read from /proc/cpuinfo (vendor_id, model name, the
 * flags kiln's templates care about) and sysfs (cache sizes of cpu0's L1d,
 * L2 and L3; the online CPUs). Its id hashes the JSON text, so two machines
 * of the same class share it and a different class (another cache size,
 * AVX-512 missing) does not. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/hash.h"
#include "toolchain/toolchain.h"
#include "tune/tune.h"

/* ISA flags a record depends on (a subset: a kernel compiled for AVX-512 on
 * a machine without it is not the same code). */
static const char *const isa_flags[] = {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f",
                                        "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                                        "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"};

static char fp_json[1024];
static char fp_id[17];

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
}

/* The value after "key<spaces>:" on the first matching line, into out. */
static bool cpuinfo_field(const char *key, char *out, size_t size)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    size_t kl = strlen(key);
    while (!found && getline(&line, &cap, f) >= 0) {
        if (strncmp(line, key, kl) != 0 || (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':'))
            continue;
        const char *c = strchr(line, ':');
        if (!c)
            continue;
        c++;
        while (*c == ' ')
            c++;
        snprintf(out, size, "%s", c);
        trim(out);
        found = true;
    }
    free(line);
    fclose(f);
    return found;
}

/* Cache size in KiB of cpu0's cache of `level` and type (Data/Unified). */
static int cache_kib(int level, bool data)
{
    for (int i = 0; i < 8; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int lv = fgets(buf, sizeof buf, f) ? atoi(buf) : 0;
        fclose(f);
        if (lv != level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!(f = fopen(path, "r")))
            continue;
        bool ok = fgets(buf, sizeof buf, f) && (data ? !strncmp(buf, "Data", 4)
                                                     : strncmp(buf, "Instruction", 11) != 0);
        fclose(f);
        if (!ok)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        int kib = 0;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            long v = strtol(buf, &end, 10);
            kib = (int)(*end == 'M' ? v * 1024 : *end == 'K' ? v : v / 1024);
        }
        fclose(f);
        return kib;
    }
    return 0;
}

static void fingerprint_init(void)
{
    if (fp_id[0])
        return;
    char vendor[128] = "", model[256] = "", flags[8192] = "";
    cpuinfo_field("vendor_id", vendor, sizeof vendor);
    cpuinfo_field("model name", model, sizeof model);
    cpuinfo_field("flags", flags, sizeof flags);
    cJSON *j = cJSON_CreateObject(), *isa = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "vendor", vendor);
    cJSON_AddStringToObject(j, "model", model);
    for (size_t i = 0; i < sizeof isa_flags / sizeof *isa_flags; i++) {
        /* whole words of the flags line */
        size_t n = strlen(isa_flags[i]);
        for (const char *p = flags; (p = strstr(p, isa_flags[i])) != NULL; p += n)
            if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) {
                cJSON_AddItemToArray(isa, cJSON_CreateString(isa_flags[i]));
                break;
            }
    }
    cJSON_AddItemToObject(j, "isa", isa);
    cJSON_AddNumberToObject(j, "l1d_kib", cache_kib(1, true));
    cJSON_AddNumberToObject(j, "l2_kib", cache_kib(2, false));
    cJSON_AddNumberToObject(j, "l3_kib", cache_kib(3, false));
    long nt = sysconf(_SC_NPROCESSORS_ONLN);
    cJSON_AddNumberToObject(j, "threads", nt > 0 ? (double)nt : 0);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    snprintf(fp_json, sizeof fp_json, "%s", s ? s : "{}");
    free(s);
    snprintf(fp_id, sizeof fp_id, "%016llx",
             (unsigned long long)kiln_hash64(fp_json, strlen(fp_json)));
}

const char *kiln_cpu_fingerprint_json(void)
{
    fingerprint_init();
    return fp_json;
}

const char *kiln_cpu_fingerprint_id(void)
{
    fingerprint_init();
    return fp_id;
}

void kiln_template_hash(const char *template_name, char out[17])
{
    char headers[33];
    kiln_headers_hash(headers);
    kiln_hash h;
    kiln_hash_init(&h, 0x74706c68ULL); /* "tplh" */
    kiln_hash_str(&h, KILN_VERSION);
    kiln_hash_str(&h, template_name ? template_name : "");
    kiln_hash_str(&h, headers);
    char hex[33];
    kiln_hash_hex(&h, hex);
    memcpy(out, hex, 16);
    out[16] = 0;
}

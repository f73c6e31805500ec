/* tests/runtime/rt_models.h: paths of the hand-written test models
 * (tests/runtime/models, built by tests/CMakeLists.txt). */
#ifndef KILN_TEST_RT_MODELS_H
#define KILN_TEST_RT_MODELS_H

#include <stdio.h>

#ifndef KILN_RT_MODEL_DIR
#error "KILN_RT_MODEL_DIR must name the folder of the runtime test models"
#endif

/* KILN_RT_MODEL_DIR "/rt_model_<name>.so" into a static buffer */
static inline const char *rt_model(const char *name)
{
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/rt_model_%s.so", KILN_RT_MODEL_DIR, name);
    return b;
}

#endif

/* tests/fuzz/fuzz_onnx.c: libFuzzer target for the ONNX importer.
 *
 * Feeds arbitrary bytes to kiln_onnx_load_buffer (no base directory, so
 * external data is refused without touching the file system) and, when a
 * graph comes back, validates it. Any crash, hang, leak or sanitizer report is
 * a bug: hostile input must only ever produce a status and a message.
 *
 * Not a cmocka test (tests/CMakeLists.txt globs test_*.c only). Build with
 * clang's -fsanitize=fuzzer against the library sources (see the command in
 * the lead's build notes); seed the corpus with the model.onnx files under
 * tests/data/onnx. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln/kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_graph *g = NULL;
    kiln_error err;
    memset(&err, 0, sizeof err);
    kiln_status s = kiln_onnx_load_buffer(data, size, NULL, &g, &err);
    if (s == KILN_OK) {
        (void)kiln_graph_validate(g, &err);
        kiln_graph_destroy(g);
    } else if (g != NULL || err.msg[0] == '\0') {
        __builtin_trap(); /* failures leave *out untouched and say why */
    }
    return 0;
}

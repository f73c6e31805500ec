/* tools/kiln/main.c: STUB CLI entry; to be replaced. */
#include <stdio.h>

#include "kiln/kiln.h"

int main(void)
{
    printf("kiln %s\n", KILN_VERSION);
    return 0;
}

/* Correct, but spins forever before answering. */
#include <stdio.h>
int main(void) {
    volatile unsigned long i = 0;
    for (;;) ++i;
    puts("never");
    return 0;
}

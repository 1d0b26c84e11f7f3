/* Overflows on large inputs: int instead of long long. */
#include <stdio.h>
int main(void) {
    int n, x, sum = 0;
    if (scanf("%d", &n) != 1) return 1;
    while (n-- > 0 && scanf("%d", &x) == 1) sum += x;
    printf("%d\n", sum);
    return 0;
}

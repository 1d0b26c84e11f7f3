// tools/hot-text.sh's profiling build only: the mcount that -pg code calls on entry to each
// function (after its prologue, its arguments still in registers: all are kept). Passes the
// return address, a place inside the function, to hot_text_mark() (mark.c).
    .text
    .globl mcount
    .type mcount, @function
mcount:
    push %rax
    push %rcx
    push %rdx
    push %rsi
    push %rdi
    push %r8
    push %r9
    push %r10
    push %r11
    mov 72(%rsp), %rdi  // above the nine registers: our return address
    call hot_text_mark  // aligned: the caller's call site was, 8 + 72 bytes pushed since
    pop %r11
    pop %r10
    pop %r9
    pop %r8
    pop %rdi
    pop %rsi
    pop %rdx
    pop %rcx
    pop %rax
    ret
    .size mcount, .-mcount
    .section .note.GNU-stack,"",@progbits

/*
 * Licensed under the Apache License, Version 2.0 (the "License"); you may
 * not use this file except in compliance with the License. You may obtain
 * a copy of the License at
 *
 *      http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 * WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 * License for the specific language governing permissions and limitations
 * under the License.
 *
 * bmc-noise-unikernel's entry: the multiboot (v1) header, and the 32-bit
 * protected-mode start the loader jumps to (EAX = the multiboot magic,
 * EBX = the information structure, interrupts off, no paging): a GDT of
 * our own (the loader's may be gone), the BSS cleared (not every loader
 * clears it), a stack, the x87 FPU, then kmain(magic, info).  Also the
 * exception entries: an NMI returns at once, any other exception calls
 * trap(vector, error code, eip), which reports it and powers off.
 */

#define MB_MAGIC 0x1BADB002
/* No flag: the ELF headers say where to load; no video mode, no module,
 * nothing a loader may not do (iPXE, GRUB and QEMU's -kernel take it). */
#define MB_FLAGS 0

    .section .multiboot, "a"
    .balign 4
    .long MB_MAGIC
    .long MB_FLAGS
    .long -(MB_MAGIC + MB_FLAGS)

    .text
    .code32
    .globl _start
_start:
    cli
    cld
    mov %eax, %ebp              /* keep the magic, EBX keeps the info */
    lgdt gdt_desc
    ljmp $0x08, $1f
1:  mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %fs
    mov %ax, %gs
    mov %ax, %ss
    mov $__bss_start, %edi
    mov $__bss_end, %ecx
    sub %edi, %ecx
    xor %eax, %eax
    rep stosb
    mov $stack_top, %esp
    /* The FPU: no emulation (EM), not switched (TS), native errors (NE),
     * WAIT obeys TS (MP). */
    mov %cr0, %eax
    and $~0x0c, %eax
    or $0x22, %eax
    mov %eax, %cr0
    fninit
    sub $8, %esp                /* 16-byte aligned at the call */
    push %ebx
    push %ebp
    call kmain
2:  cli
    hlt
    jmp 2b

/* The exception entries: vector, then an error code where the CPU pushes
 * none, so that trap() always gets (vector, error code, eip). */
    .macro trap_entry vector
trap_\vector:
    .if \vector == 8 || (\vector >= 10 && \vector <= 14) || \vector == 17 \
        || \vector == 21 || \vector == 29 || \vector == 30
    .else
    push $0
    .endif
    push $\vector
    jmp trap_common
    .endm

    .irp v, 0,1,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    trap_entry \v
    .endr

/* An NMI (a watchdog, a machine's own) is noise like any other. */
trap_2:
    iret

trap_common:
    /* (%esp) vector, 4(%esp) error code, 8(%esp) eip: trap's arguments
     * once the call pushes its return address. */
    call trap
    jmp 2b

    .section .rodata
    .globl trap_entries
    .balign 4
trap_entries:
    .irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .long trap_\v
    .endr

    .balign 8
gdt:
    .quad 0
    .quad 0x00cf9a000000ffff    /* 0x08: flat 32-bit code */
    .quad 0x00cf92000000ffff    /* 0x10: flat data */
gdt_end:
gdt_desc:
    .word gdt_end - gdt - 1
    .long gdt

    .bss
    .balign 16
stack:
    .skip 65536
stack_top:

    .section .note.GNU-stack, "", @progbits

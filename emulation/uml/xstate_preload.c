/* pqs-uml-xstate.so - lets Debian's user-mode Linux (6.1) run on a host CPU
 * with a large XSAVE area (Intel AMX: about 11 KB).
 *
 * UML switches its processes' FPU state with PTRACE_SETREGSET(NT_X86_XSTATE)
 * from a buffer sized for the CPUs it was written for.  The host kernel only
 * accepts a SETREGSET of the whole XSAVE area and answers EFAULT otherwise,
 * so on an AMX host UML's first process dies ("ptrace set fp regs failed,
 * errno = 14") and the kernel panics before init runs.  GETREGSET with a short
 * buffer is fine (the kernel truncates), so only SETREGSET needs help: read
 * the tracee's whole area, lay UML's bytes over its start (the legacy area,
 * the header and every component UML knows), and set the whole area.  The
 * components beyond UML's buffer (AMX tiles, which no UML process uses) keep
 * the tracee's own, untouched values.
 *
 * Loaded with LD_PRELOAD into the UML kernel process only (emulation/uml.py);
 * every other ptrace request passes through unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef long (*ptrace_fn)(int, pid_t, void *, void *);

/* Larger than any XSAVE area a CPU has today (AMX: 11008 bytes). */
#define XSTATE_MAX 65536

long ptrace(enum __ptrace_request req, ...)
{
	va_list ap;
	va_start(ap, req);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *);
	void *data = va_arg(ap, void *);
	va_end(ap);

	ptrace_fn real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
	if (!real)
		return -1;
	if (req == PTRACE_SETREGSET && (long)addr == NT_X86_XSTATE && data) {
		/* UML's kernel is single-threaded: one static buffer is enough. */
		static unsigned char whole[XSTATE_MAX] __attribute__((aligned(64)));
		struct iovec *iov = data;
		struct iovec all = {whole, sizeof(whole)};
		if (real(PTRACE_GETREGSET, pid, addr, &all) == 0 && all.iov_len > iov->iov_len) {
			memcpy(whole, iov->iov_base, iov->iov_len);
			return real(PTRACE_SETREGSET, pid, addr, &all);
		}
	}
	return real(req, pid, addr, data);
}

/* bfcsim record: log the heap calls of the process bfcsim started, in
   glibc's mtrace format, each with the caller in the program: past the C
   and C++ runtime's own allocating functions (strdup, operator new, ...). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static int log_fd = -1; /* -1: not tracing */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[1 << 16];
static size_t log_used;
static int log_direct; /* after the destructor: what libc frees at exit goes out at once */
static __thread int busy __attribute__((tls_model("initial-exec"))); /* in bfcsim's own code: its allocations are not the program's */

/* The runtime's objects, whose frames are passed over to find the caller. */
#define MAX_SKIP 32
static struct { uintptr_t lo, hi; } skip[MAX_SKIP];
static int nskip;

static int runtime_object(const char *name) {
	static const char *const runtime[] = {"/libc.so", "/libstdc++.so", "/libgcc_s.so", "/ld-linux", "/libm.so",
		"/libc++.so", "/libc++abi.so", "bfcsim-record"};
	for (size_t i = 0; i < sizeof runtime / sizeof runtime[0]; i++)
		if (strstr(name, runtime[i]) != NULL)
			return 1;
	return 0;
}

static int note_object(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size, (void)data;
	if (info->dlpi_name == NULL || !runtime_object(info->dlpi_name))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && nskip < MAX_SKIP; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			skip[nskip].lo = info->dlpi_addr + ph->p_vaddr;
			skip[nskip].hi = skip[nskip].lo + ph->p_memsz;
			nskip++;
		}
	}
	return 0;
}

static int in_runtime(void *pc) {
	uintptr_t a = (uintptr_t)pc;
	for (int i = 0; i < nskip; i++)
		if (a >= skip[i].lo && a < skip[i].hi)
			return 1;
	return 0;
}

/* caller returns the first return address outside the runtime: ret (the
   allocating function's caller) itself, or a frame further out. */
static void *caller(void *ret) {
	if (!in_runtime(ret))
		return ret;
	void *frames[48];
	int n = backtrace(frames, 48);
	for (int i = 0; i < n; i++)
		if (!in_runtime(frames[i]))
			return frames[i];
	return ret;
}

static void flush_locked(void) {
	size_t off = 0;
	while (off < log_used) {
		ssize_t n = write(log_fd, log_buf + off, log_used - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	log_used = 0;
}

/* where_text writes "@ WHERE " into buf, as glibc's mtrace does, and
   returns its length. */
static int where_text(char *buf, size_t size, void *where) {
	Dl_info info;
	int n;
	if (where != NULL && dladdr(where, &info) != 0) {
		/* The object, the symbol and the offset in hex, and the address
		   relative to the object, so that a log does not change with where
		   the loader put it. */
		const char *file = info.dli_fname != NULL ? info.dli_fname : "";
		uintptr_t a = (uintptr_t)where;
		void *rel = (void *)(a - (uintptr_t)info.dli_fbase);
		if (info.dli_sname != NULL) {
			uintptr_t s = (uintptr_t)info.dli_saddr;
			n = snprintf(buf, size, "@ %s%s(%s%c%lx)[%p] ", file, *file ? ":" : "", info.dli_sname,
				a >= s ? '+' : '-', (unsigned long)(a >= s ? a - s : s - a), rel);
		} else {
			n = snprintf(buf, size, "@ %s%s[%p] ", file, *file ? ":" : "", rel);
		}
	} else {
		n = snprintf(buf, size, "@ [%p] ", where);
	}
	if (n < 0)
		return 0;
	return (size_t)n < size ? n : (int)size - 1;
}

/* append adds text to the log; the caller holds log_mu. */
static void append_locked(const char *text, size_t n) {
	if (log_fd < 0)
		return;
	if (log_used + n > sizeof log_buf)
		flush_locked();
	if (n > sizeof log_buf)
		n = sizeof log_buf;
	memcpy(log_buf + log_used, text, n);
	log_used += n;
	if (log_direct)
		flush_locked();
}

/* emit writes "@ WHERE " then the op's text. */
static void emit(void *where, const char *op) {
	char line[1024];
	int n = where_text(line, sizeof line, where);
	n += snprintf(line + n, sizeof line - (size_t)n, "%s", op);
	if ((size_t)n >= sizeof line)
		n = sizeof line - 1;
	pthread_mutex_lock(&log_mu);
	append_locked(line, (size_t)n);
	pthread_mutex_unlock(&log_mu);
}

#define TRACED (log_fd >= 0 && !busy)

static void log_alloc(void *ret, void *p, size_t size) {
	char op[64];
	busy = 1;
	snprintf(op, sizeof op, "+ %p %#lx\n", p, (unsigned long)size);
	emit(caller(ret), op);
	busy = 0;
}

void *malloc(size_t size) {
	void *p = __libc_malloc(size);
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, size);
	return p;
}

void *calloc(size_t nmemb, size_t size) {
	void *p = __libc_calloc(nmemb, size);
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, nmemb * size);
	return p;
}

void *memalign(size_t align, size_t size) {
	void *p = __libc_memalign(align, size);
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, size);
	return p;
}

void *aligned_alloc(size_t align, size_t size) {
	void *p = __libc_memalign(align, size);
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, size);
	return p;
}

int posix_memalign(void **out, size_t align, size_t size) {
	if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0 || align == 0)
		return EINVAL;
	void *p = __libc_memalign(align, size);
	if (p == NULL)
		return ENOMEM;
	*out = p;
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, size);
	return 0;
}

void *valloc(size_t size) {
	void *p = __libc_valloc(size);
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, size);
	return p;
}

void *pvalloc(size_t size) {
	void *p = __libc_pvalloc(size);
	if (TRACED)
		log_alloc(__builtin_return_address(0), p, size);
	return p;
}

void free(void *p) {
	if (p != NULL && TRACED) {
		char op[64];
		busy = 1;
		snprintf(op, sizeof op, "- %p\n", p);
		emit(caller(__builtin_return_address(0)), op);
		busy = 0;
	}
	__libc_free(p);
}

/* realloc frees the old block and logs it in one step under the log's
   lock, as glibc's mtrace does: another thread that gets the old address
   from malloc logs it after this. */
void *realloc(void *old, size_t size) {
	if (!TRACED)
		return __libc_realloc(old, size);
	busy = 1;
	char where[768], text[1024];
	int w = where_text(where, sizeof where, caller(__builtin_return_address(0)));
	pthread_mutex_lock(&log_mu);
	void *p = __libc_realloc(old, size);
	int n;
	if (p == NULL) {
		if (size != 0)
			n = snprintf(text, sizeof text, "%.*s! %p %#lx\n", w, where, old, (unsigned long)size);
		else
			n = snprintf(text, sizeof text, "%.*s- %p\n", w, where, old);
	} else if (old == NULL) {
		n = snprintf(text, sizeof text, "%.*s+ %p %#lx\n", w, where, p, (unsigned long)size);
	} else {
		n = snprintf(text, sizeof text, "%.*s< %p\n%.*s> %p %#lx\n", w, where, old, w, where, p, (unsigned long)size);
	}
	if (n > 0)
		append_locked(text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
	pthread_mutex_unlock(&log_mu);
	busy = 0;
	return p;
}

void *reallocarray(void *old, size_t nmemb, size_t size) {
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, n);
}

/* Around a fork, the child stops tracing: it would write into the parent's
   log. The log is written out first (a shell forks, and may end with _exit
   and lose what is buffered), and the lock is held across the fork so that
   no other thread is in the middle of a line. */
static void before_fork(void) {
	pthread_mutex_lock(&log_mu);
	if (log_fd >= 0)
		flush_locked();
}
static void after_fork_parent(void) { pthread_mutex_unlock(&log_mu); }
static void after_fork_child(void) {
	log_fd = -1;
	log_used = 0;
	pthread_mutex_unlock(&log_mu);
}


__attribute__((constructor)) static void bfcsim_record_start(void) {
	const char *parent = getenv("BFCSIM_RECORD_PARENT");
	const char *path = getenv("MALLOC_TRACE");
	if (parent == NULL || path == NULL || atol(parent) != (long)getppid())
		return;
	busy = 1;
	dl_iterate_phdr(note_object, NULL);
	void *warm[4];
	backtrace(warm, 4); /* loads the unwinder now, not inside the program's first malloc */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	busy = 0;
	if (fd < 0)
		return;
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	log_fd = fd;
	pthread_mutex_lock(&log_mu);
	append_locked("= Start\n", 8);
	flush_locked();
	pthread_mutex_unlock(&log_mu);
}

/* At exit, what is buffered goes out, and what libc frees after the
   destructors (stdio's buffers) is written as it happens. A program that
   ends with _exit or a signal loses the buffer's last lines. */
__attribute__((destructor)) static void bfcsim_record_end(void) {
	if (log_fd < 0)
		return;
	pthread_mutex_lock(&log_mu);
	flush_locked();
	log_direct = 1;
	pthread_mutex_unlock(&log_mu);
}

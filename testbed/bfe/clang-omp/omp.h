/* omp.h for the clang builds (sanitizers, fuzz targets) of code that includes bfe-bf's headers.
 *
 * bfe-bf's public types.h includes <omp.h> (for omp_lock_t, in its time-based variant we do not
 * use). clang has no omp.h without libomp-dev, and gcc's own uses gcc-only attributes. The
 * programs link gcc's OpenMP runtime (libgomp), so this declares what our code calls from it and
 * omp_lock_t with libgomp's layout on Linux (4 bytes, 4-aligned; gcc's omp.h); gcc builds use
 * gcc's omp.h itself. */
#ifndef _OMP_H
#define _OMP_H

typedef struct {
    unsigned char _x[4] __attribute__((__aligned__(4)));
} omp_lock_t;

extern void omp_set_num_threads(int);
extern int omp_get_max_threads(void);
extern int omp_get_num_procs(void);

#endif

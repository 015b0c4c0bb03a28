/* memory.c: device memory (cuMemAlloc), virtual memory management (cuMemCreate,
 * cuMemAddressReserve, cuMemMap, ...), pinned host memory and synchronous copies. */
#include "fakecuda.h"

/* ---- Address checks ---- */

region_t *region_at(vec *rs, uintptr_t p, size_t n) {
	for (int i = 0; i < rs->n; i++) {
		region_t *r = rs->v[i];
		if (p >= r->ptr && p + n <= r->ptr + r->size && p + n >= p)
			return r;
	}
	return NULL;
}

static map_t *map_containing(uintptr_t p) {
	for (int i = 0; i < maps.n; i++) {
		map_t *m = maps.v[i];
		if (p >= m->va && p < m->va + m->size)
			return m;
	}
	return NULL;
}

/* device_ok reports whether [p, p+n) is device memory the caller may read (or write):
 * inside one cuMemAlloc allocation, or covered without a hole by mappings with access. */
int device_ok(uintptr_t p, size_t n, int write) {
	if (n == 0)
		return 1;
	if (p + n < p)
		return 0;
	if (region_at(&allocs, p, n))
		return 1;
	for (uintptr_t at = p; at < p + n;) {
		map_t *m = map_containing(at);
		if (!m || m->access == CU_MEM_ACCESS_FLAGS_PROT_NONE || (write && m->access != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return 0;
		at = m->va + m->size;
	}
	return 1;
}
/* ---- Memory: segments ---- */

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
	ENTER("cuMemGetInfo_v2", 1);
	if (!free_ || !total)
		return leave(CUDA_ERROR_INVALID_VALUE);
	*free_ = (size_t)(knob.memory - used);
	*total = (size_t)knob.memory;
	return leave(CUDA_SUCCESS);
}

static void *map_anon(size_t size) {
	void *p = mmap(NULL, round_up(size, page_size()), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* new_region maps size bytes of host memory and records them in rs; NULL if it cannot. */
static void *new_region(vec *rs, size_t size) {
	void *p = map_anon(size);
	if (p) {
		region_t *r = calloc(1, sizeof(region_t));
		*r = (region_t){current, (uintptr_t)p, size};
		vpush(rs, r);
	}
	return p;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
	ENTER("cuMemAlloc_v2", 1);
	if (!dptr || size == 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	void *p = (long long)size <= knob.memory - used ? new_region(&allocs, size) : NULL;
	if (!p)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	used += size;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return leave(CUDA_SUCCESS);
}

static int region_index(vec *rs, uintptr_t p) {
	for (int i = 0; i < rs->n; i++)
		if (((region_t *)rs->v[i])->ptr == p && ((region_t *)rs->v[i])->ctx == current)
			return i;
	return -1;
}

/* free_region frees the region of rs at p. Pinned host memory goes once the context's
 * queued work, which may still use it, has run (cuMemFreeHost synchronizes). Device memory
 * goes at once: queued work that touches it faults when it comes to run (doom), as
 * cuMemFree_v2 need not wait for it. */
static CUresult free_region(vec *rs, uintptr_t p, void (*release)(void *)) {
	int i = region_index(rs, p);
	if (i < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (rs == &pinned)
		drain(current);
	else
		doom(current, p, ((region_t *)rs->v[i])->size);
	i = region_index(rs, p);
	if (i < 0)
		return CUDA_ERROR_INVALID_VALUE; /* another thread freed it meanwhile */
	region_t *r = rs->v[i];
	vdel(rs, i);
	release(r);
	free(r);
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
	ENTER("cuMemFree_v2", 1);
	return leave(free_region(&allocs, (uintptr_t)dptr, release_alloc));
}

/* cuMemGetAddressRange_v2 gives the cuMemAlloc allocation, or the mapping, that holds
 * dptr: the fake cuBLAS checks the workspace it is given with it. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
	ENTER("cuMemGetAddressRange_v2", 1);
	region_t *r = region_at(&allocs, (uintptr_t)dptr, 1);
	map_t *m = r ? NULL : map_containing((uintptr_t)dptr);
	if (!r && !m)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (base)
		*base = r ? (CUdeviceptr)r->ptr : (CUdeviceptr)m->va;
	if (size)
		*size = r ? r->size : m->size;
	return leave(CUDA_SUCCESS);
}

/* ---- Memory: virtual memory management ---- */

static CUresult check_prop(const CUmemAllocationProp *p) {
	if (!knob.vmm)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED || p->requestedHandleTypes != 0 ||
	    p->location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->win32HandleMetaData != NULL ||
	    p->allocFlags.compressionType != 0 || p->allocFlags.gpuDirectRDMACapable != 0 || p->allocFlags.usage != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < 4; i++)
		if (p->allocFlags.reserved[i])
			return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(p->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option) {
	ENTER("cuMemGetAllocationGranularity", 1);
	CUresult r = check_prop(prop);
	if (r != CUDA_SUCCESS)
		return leave(r);
	if (!g || (option != 0 && option != 1))
		return leave(CUDA_ERROR_INVALID_VALUE);
	*g = (size_t)knob.granularity;
	return leave(CUDA_SUCCESS);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
	ENTER("cuMemCreate", 1);
	CUresult r = check_prop(prop);
	if (r != CUDA_SUCCESS)
		return leave(r);
	if (!h || flags != 0 || size == 0 || size % knob.granularity != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if ((long long)size > knob.memory - used)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	if (memfd < 0 && (memfd = memfd_create("fakecuda-device-memory", MFD_CLOEXEC)) < 0)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	if (ftruncate(memfd, memfd_end + (off_t)size) != 0)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	handle_t *x = calloc(1, sizeof(handle_t));
	*x = (handle_t){current, next_handle++, size, memfd_end, 0, 0};
	memfd_end += (off_t)size; /* offsets are never reused: released stretches are punched out */
	vpush(&handles, x);
	used += size;
	*h = x->id;
	return leave(CUDA_SUCCESS);
}

static int handle_index(CUmemGenericAllocationHandle id) {
	for (int i = 0; i < handles.n; i++)
		if (((handle_t *)handles.v[i])->id == id)
			return i;
	return -1;
}

/* cuMemRelease of a mapped handle is legal (cuda.h: "The generic memory handle can be
 * freed when there are still outstanding mappings"): the memory goes at the last unmap. */
CUresult cuMemRelease(CUmemGenericAllocationHandle id) {
	ENTER("cuMemRelease", 1);
	int i = handle_index(id);
	if (i < 0 || ((handle_t *)handles.v[i])->released)
		return leave(CUDA_ERROR_INVALID_VALUE);
	handle_t *h = handles.v[i];
	h->released = 1;
	if (h->mapped == 0) {
		vdel(&handles, i);
		release_handle(h);
		free(h);
	}
	return leave(CUDA_SUCCESS);
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
	ENTER("cuMemAddressReserve", 1);
	(void)addr; /* a hint: the driver may place the range elsewhere */
	if (!ptr || flags != 0 || size == 0 || size % page_size() != 0 || (alignment & (alignment - 1)) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	size_t align = alignment ? alignment : (size_t)knob.granularity;
	if (align < page_size())
		align = page_size();
	void *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	uintptr_t start = round_up((uintptr_t)p, align);
	if (start > (uintptr_t)p)
		munmap(p, start - (uintptr_t)p);
	if ((uintptr_t)p + align > start)
		munmap((void *)(start + size), (uintptr_t)p + align - start);
	resv_t *r = calloc(1, sizeof(resv_t));
	*r = (resv_t){current, start, size};
	vpush(&resvs, r);
	*ptr = (CUdeviceptr)start;
	return leave(CUDA_SUCCESS);
}

static resv_t *resv_containing(uintptr_t p, size_t n) {
	for (int i = 0; i < resvs.n; i++) {
		resv_t *r = resvs.v[i];
		if (p >= r->va && p + n <= r->va + r->size && p + n > p)
			return r;
	}
	return NULL;
}

/* The fake refuses to free a reservation with mappings in it; the header leaves that case
 * unspecified, and a real driver's behaviour there is not something to rely on. */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
	ENTER("cuMemAddressFree", 1);
	for (int i = 0; i < resvs.n; i++) {
		resv_t *r = resvs.v[i];
		if (r->va != ptr)
			continue;
		if (r->size != size)
			return leave(CUDA_ERROR_INVALID_VALUE);
		for (int j = 0; j < maps.n; j++)
			if (((map_t *)maps.v[j])->va >= r->va && ((map_t *)maps.v[j])->va < r->va + r->size)
				return leave(CUDA_ERROR_INVALID_VALUE);
		vdel(&resvs, i);
		munmap((void *)r->va, r->size);
		free(r);
		return leave(CUDA_SUCCESS);
	}
	return leave(CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle id, unsigned long long flags) {
	ENTER("cuMemMap", 1);
	size_t g = (size_t)knob.granularity;
	int i = handle_index(id);
	if (i < 0 || flags != 0 || offset != 0 || size == 0 || size % g != 0 || ptr % g != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	handle_t *h = handles.v[i];
	if (h->released || size > h->size || !resv_containing(ptr, size))
		return leave(CUDA_ERROR_INVALID_VALUE);
	for (int j = 0; j < maps.n; j++) {
		map_t *m = maps.v[j];
		if (m->va < ptr + size && ptr < m->va + m->size)
			return leave(CUDA_ERROR_INVALID_VALUE); /* "can only create mappings on VA ranges that are not currently mapped" */
	}
	if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, memfd, h->off) == MAP_FAILED)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	map_t *m = calloc(1, sizeof(map_t));
	*m = (map_t){ptr, size, h, CU_MEM_ACCESS_FLAGS_PROT_NONE};
	vpush(&maps, m);
	h->mapped++;
	return leave(CUDA_SUCCESS);
}

/* whole_maps reports whether [p, p+n) is covered, with no hole, by mappings that lie
 * entirely inside it, and calls f on each. */
static int whole_maps(uintptr_t p, size_t n, void (*f)(map_t *, void *), void *arg) {
	if (n == 0 || p + n < p)
		return 0;
	for (int j = 0; j < maps.n; j++) {
		map_t *m = maps.v[j];
		int overlaps = m->va < p + n && p < m->va + m->size;
		if (overlaps && (m->va < p || m->va + m->size > p + n))
			return 0;
	}
	for (uintptr_t at = p; at < p + n;) {
		map_t *m = map_containing(at);
		if (!m)
			return 0;
		at = m->va + m->size;
	}
	if (f)
		for (int j = maps.n - 1; j >= 0; j--) {
			map_t *m = maps.v[j];
			if (m->va >= p && m->va < p + n)
				f(m, arg);
		}
	return 1;
}

static void set_access(map_t *m, void *arg) { m->access = *(int *)arg; }

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
	ENTER("cuMemSetAccess", 1);
	if (!desc || count == 0 || ptr % knob.granularity != 0 || size % knob.granularity != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	int flags = -1;
	for (size_t k = 0; k < count; k++) {
		if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return leave(CUDA_ERROR_INVALID_VALUE);
		if (!valid_device(desc[k].location.id))
			return leave(CUDA_ERROR_INVALID_DEVICE);
		if (desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return leave(CUDA_ERROR_INVALID_VALUE);
		if (desc[k].location.id == current->dev)
			flags = desc[k].flags;
	}
	if (!whole_maps(ptr, size, NULL, NULL))
		return leave(CUDA_ERROR_INVALID_VALUE); /* "must be a fully mapped address range" */
	if (flags < 0)
		return leave(CUDA_SUCCESS); /* other devices only: nothing this one sees changes */
	int prot = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
	           : flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
	                                                       : PROT_NONE;
	if (mprotect((void *)ptr, size, prot) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	whole_maps(ptr, size, set_access, &flags);
	return leave(CUDA_SUCCESS);
}

static void drop_map(map_t *m, void *arg) {
	(void)arg;
	handle_t *h = m->h;
	vdel(&maps, vfind(&maps, m));
	free(m);
	if (--h->mapped == 0 && h->released) {
		vdel(&handles, vfind(&handles, h));
		release_handle(h);
		free(h);
	}
}

/* cuMemUnmap "cannot unmap a sub-range of an address range mapped by cuMemCreate /
 * cuMemMap": the span must consist of whole mappings. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
	ENTER("cuMemUnmap", 1);
	if (!whole_maps(ptr, size, NULL, NULL))
		return leave(CUDA_ERROR_INVALID_VALUE);
	/* The driver need not wait for queued work that uses the range (PyTorch's expandable
	 * segments synchronize first because it "does not appear to synchronize in all cases"):
	 * such work faults when it comes to run. */
	doom(current, ptr, size);
	if (!whole_maps(ptr, size, NULL, NULL))
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (mmap((void *)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
		return leave(CUDA_ERROR_INVALID_VALUE);
	whole_maps(ptr, size, drop_map, NULL);
	return leave(CUDA_SUCCESS);
}
/* ---- Pinned host memory ---- */

CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags) {
	ENTER("cuMemHostAlloc", 1);
	if (!pp || size == 0 || (flags & ~7u) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	int room = knob.pinned && (long long)size <= knob.pinned_limit - pinned_used;
	void *p = room ? new_region(&pinned, size) : NULL;
	if (!p)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	pinned_used += size;
	*pp = p;
	return leave(CUDA_SUCCESS);
}

CUresult cuMemFreeHost(void *p) {
	ENTER("cuMemFreeHost", 1);
	return leave(free_region(&pinned, (uintptr_t)p, release_pinned));
}

void release_alloc(void *x) {
	region_t *r = x;
	munmap((void *)r->ptr, round_up(r->size, page_size()));
	used -= r->size;
}

void release_pinned(void *x) {
	region_t *r = x;
	munmap((void *)r->ptr, round_up(r->size, page_size()));
	pinned_used -= r->size;
}

void release_resv(void *x) {
	resv_t *r = x;
	for (int i = maps.n - 1; i >= 0; i--) {
		map_t *m = maps.v[i];
		if (m->va >= r->va && m->va < r->va + r->size) {
			m->h->mapped--;
			vdel(&maps, i);
			free(m);
		}
	}
	munmap((void *)r->va, r->size);
}

/* release_handle gives a handle's memory back: a released handle counts as used until
 * its last mapping goes, as the driver frees it only then. */
void release_handle(void *x) {
	handle_t *h = x;
	fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, h->off, h->size);
	used -= h->size;
}


/* ---- Synchronous copies ---- */

/* copy_now copies n bytes at once; dev is the device side, which must be mapped with
 * access (written if write). */
static CUresult copy_now(void *dst, const void *src, size_t n, uintptr_t dev, int write) {
	if (!device_ok(dev, n, write) || (n && (!dst || !src)))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, src, n);
	return CUDA_SUCCESS;
}

/* land_legacy lands the pending legacy copies of context c made before op_seq `before`
 * (all: ~0ULL), in order. Called with mu held. */
void land_legacy(ctx_t *c, unsigned long long before) {
	for (int i = 0; i < legacy.n;) {
		legacy_t *l = legacy.v[i];
		if (l->ctx != c || l->issued >= before) {
			i++;
			continue;
		}
		memcpy(l->dst, l->staging, l->n);
		free(l->staging);
		free(l);
		for (int j = i + 1; j < legacy.n; j++) /* keep the order: vdel would not */
			legacy.v[j - 1] = legacy.v[j];
		legacy.n--;
	}
}

/* A synchronous copy to the device from pageable memory returns once the bytes are staged
 * ("the DMA to final destination may not have completed"); from pinned memory it returns
 * once done. Either is ordered after the legacy stream's earlier work. */
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	ENTER("cuMemcpyHtoD_v2", 1);
	land_legacy(current, ~0ULL);
	if (region_at(&pinned, (uintptr_t)src, n) || n == 0)
		return leave(copy_now((void *)dst, src, n, dst, 1));
	if (!device_ok(dst, n, 1) || !src)
		return leave(CUDA_ERROR_INVALID_VALUE);
	legacy_t *l = calloc(1, sizeof(legacy_t));
	*l = (legacy_t){current, (void *)dst, malloc(n), n, ++op_seq};
	memcpy(l->staging, src, n);
	vpush(&legacy, l);
	return leave(CUDA_SUCCESS);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	ENTER("cuMemcpyDtoH_v2", 1);
	land_legacy(current, ~0ULL);
	return leave(copy_now(dst, (const void *)src, n, src, 0));
}

/*
 * cc — collective communication for NVIDIA GPUs.
 *
 * The whole public C API. Compiles as C99 and C++, includes no CUDA header.
 * Every call returns a cc_result_t; on failure cc_last_error() tells the
 * calling thread what happened in words (who, what, what to do next).
 * No C++ exception ever crosses this API.
 */
#ifndef CC_CC_H
#define CC_CC_H

#include <stddef.h>
#include <stdint.h>

#include "cc_version.h"

#if defined(_WIN32)
#define CC_API
#elif defined(__GNUC__) || defined(__clang__)
#define CC_API __attribute__((visibility("default")))
#else
#define CC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- types */

typedef struct cc_comm* cc_comm_t;       /* a communicator (wraps an NCCL one) */
typedef struct cc_store* cc_store_t;     /* a connection to a rendezvous key-value store */
typedef struct cc_server* cc_server_t;   /* an embedded rendezvous server */
typedef struct CUstream_st* cc_stream_t; /* a cudaStream_t; NULL = the default stream */

/* Result codes. Values are fixed and never reordered; new ones are appended
 * before CC_NUM_RESULTS. */
typedef enum cc_result {
  CC_SUCCESS = 0,
  CC_ERR_INVALID_ARGUMENT = 1,  /* a NULL pointer, a value out of range, ... */
  CC_ERR_INVALID_USAGE = 2,     /* a call in the wrong state (e.g. a destroyed communicator) */
  CC_ERR_NO_DEVICE = 3,         /* no usable CUDA device */
  CC_ERR_CUDA = 4,              /* a CUDA runtime call failed */
  CC_ERR_NCCL = 5,              /* an NCCL call failed */
  CC_ERR_SYSTEM = 6,            /* an operating-system call failed */
  CC_ERR_RENDEZVOUS = 7,        /* the rendezvous server could not be reached or refused us */
  CC_ERR_AUTH = 8,              /* the rendezvous token was refused */
  CC_ERR_MISMATCH = 9,          /* ranks disagree (world size, rank, NCCL version, GPU) */
  CC_ERR_TIMEOUT = 10,          /* a deadline passed */
  CC_ERR_PEER_FAILED = 11,      /* another rank of the job failed or vanished */
  CC_ERR_ABORTED = 12,          /* the communicator was aborted */
  CC_ERR_INTERNAL = 13,         /* a bug in cc: please report it */
  CC_ERR_BUFFER_TOO_SMALL = 14, /* an output buffer is smaller than the value */
  CC_NUM_RESULTS = 15
} cc_result_t;

/* Data types: every type NCCL knows. */
typedef enum cc_datatype {
  CC_INT8 = 0,
  CC_UINT8 = 1,
  CC_INT32 = 2,
  CC_UINT32 = 3,
  CC_INT64 = 4,
  CC_UINT64 = 5,
  CC_FLOAT16 = 6,
  CC_FLOAT32 = 7,
  CC_FLOAT64 = 8,
  CC_BFLOAT16 = 9,
  CC_FLOAT8_E4M3 = 10,
  CC_FLOAT8_E5M2 = 11,
  CC_NUM_DATATYPES = 12
} cc_datatype_t;

/* Reduction operations. */
typedef enum cc_redop {
  CC_SUM = 0,
  CC_PROD = 1,
  CC_MAX = 2,
  CC_MIN = 3,
  CC_AVG = 4,
  CC_NUM_REDOPS = 5
} cc_redop_t;

/* Where a communicator finds its rendezvous server. */
#define CC_RENDEZVOUS_EMBEDDED 1 /* rank 0 hosts a server on MASTER_PORT (default) */
#define CC_RENDEZVOUS_EXTERNAL 2 /* a running cc-rendezvous (or cc-run) serves the job */

/* config.fast_allreduce: all-reduces up to 8 MiB on ranks of one host whose
 * GPUs reach each other (NVLink) through cc's own kernels over peer memory
 * that cc maps itself (CUDA IPC; any NCCL), where they beat ncclAllReduce;
 * config.fast_allreduce_plan says which sizes they take. */
#define CC_FAST_ALLREDUCE_OFF 0
#define CC_FAST_ALLREDUCE_AUTO 1
#define CC_FAST_ALLREDUCE_REQUIRE 2

#define CC_CONFIG_UNDEF_INT INT32_MIN
#define CC_CONFIG_UNDEF_PTR NULL
#define CC_CONFIG_MAGIC 0xcc0c0f19u

/* Configuration. Always start from CC_CONFIG_INIT; fields left undefined take
 * their value from the CC_* environment variable named beside them, else the
 * default. Fields are only ever appended, so old binaries keep working. */
typedef struct cc_config {
  size_t size;          /* sizeof(cc_config_t) of the caller's header */
  unsigned int magic;   /* CC_CONFIG_MAGIC */
  unsigned int version; /* CC_VERSION_CODE of the caller's header */
  int device;           /* CUDA device; CC_DEVICE; default LOCAL_RANK % device count */
  int timeout_ms;     /* init, store and collective deadline; CC_TIMEOUT_MS; 0 = default (300000) */
  const char* job_id; /* namespace on the rendezvous server; CC_JOB_ID; default "default" */
  const char* token;  /* shared secret; CC_RENDEZVOUS_TOKEN(_FILE); default none */
  int rendezvous;     /* CC_RENDEZVOUS_EMBEDDED or _EXTERNAL; CC_RENDEZVOUS=embedded|external */
  int heartbeat_ms;   /* control-channel heartbeat interval; CC_HEARTBEAT_MS; default 1000 */
  int heartbeat_misses; /* heartbeats missed before a peer is declared dead; CC_HEARTBEAT_MISSES;
                           default 5 */
  int fast_allreduce;   /* cc's all-reduce kernels: CC_FAST_ALLREDUCE_OFF, _AUTO (default) or
                           _REQUIRE (init fails where they cannot run); CC_FAST_ALLREDUCE=0|1|require */
  const char* fast_allreduce_plan; /* which sizes they take, decided by rank 0 for all: "auto"
                           (default: measured against ncclAllReduce at init, cached per machine
                           in CC_CACHE_DIR), "measure" (measure again), or a plan such as
                           "ll:1M,oneshot:8M" (cc_comm_allreduce_plan's form);
                           CC_FAST_ALLREDUCE_PLAN */
  int job_ttl_ms;       /* how long a rendezvous server this process starts keeps a job's store
                           keys after the job's last connection closed; CC_JOB_TTL_MS; 0 = for
                           the server's lifetime; default 3600000 for cc_server_start, 0 for rank
                           0's embedded server (which lives as long as rank 0's communicator) */
  /* TLS 1.3 on cc's rendezvous connections (docs/RENDEZVOUS.md, "TLS"): PEM file paths. NULL =
     the CC_TLS_* variable named beside each; "" = none, whatever the environment says. */
  const char* tls_ca;          /* a client's: TLS on, the server checked against this CA;
                                  CC_TLS_CA */
  const char* tls_server_name; /* the name the server's certificate must carry (default: the host
                                  dialled); CC_TLS_SERVER_NAME */
  const char* tls_cert;        /* a server's certificate (TLS on for a server this process starts),
                                  also a client's under mTLS; CC_TLS_CERT */
  const char* tls_key;         /* the private key of tls_cert; CC_TLS_KEY */
  const char* tls_client_ca;   /* a server's: clients must show a certificate from this CA (mTLS);
                                  CC_TLS_CLIENT_CA */
} cc_config_t;

#define CC_CONFIG_INIT                                                                             \
  {                                                                                                \
    sizeof(cc_config_t), CC_CONFIG_MAGIC, CC_VERSION_CODE, CC_CONFIG_UNDEF_INT, /* device */       \
        CC_CONFIG_UNDEF_INT,                                                    /* timeout_ms */   \
        CC_CONFIG_UNDEF_PTR,                                                    /* job_id */       \
        CC_CONFIG_UNDEF_PTR,                                                    /* token */        \
        CC_CONFIG_UNDEF_INT,                                                    /* rendezvous */   \
        CC_CONFIG_UNDEF_INT,                                                    /* heartbeat_ms */ \
        CC_CONFIG_UNDEF_INT, /* heartbeat_misses */                                                \
        CC_CONFIG_UNDEF_INT, /* fast_allreduce */                                                  \
        CC_CONFIG_UNDEF_PTR, /* fast_allreduce_plan */                                             \
        CC_CONFIG_UNDEF_INT, /* job_ttl_ms */                                                      \
        CC_CONFIG_UNDEF_PTR, /* tls_ca */                                                          \
        CC_CONFIG_UNDEF_PTR, /* tls_server_name */                                                 \
        CC_CONFIG_UNDEF_PTR, /* tls_cert */                                                        \
        CC_CONFIG_UNDEF_PTR, /* tls_key */                                                         \
        CC_CONFIG_UNDEF_PTR  /* tls_client_ca */                                                   \
  }

/* ------------------------------------------------------- communicators */

/* Creates a communicator of nranks ranks; this process is `rank`.
 * Blocking: joins the rendezvous at master_addr:master_port (retrying until
 * the deadline, since rank 0's server may not be up yet), agrees on an
 * ncclUniqueId, tests that the ranks' hosts reach each other on the
 * addresses NCCL will use (CC_PREFLIGHT) and initialises NCCL on the chosen
 * device. Rank 0 hosts the rendezvous server unless config->rendezvous is
 * CC_RENDEZVOUS_EXTERNAL. A rank whose init fails after its join tells the
 * others, whose init then returns at once.
 * master_addr may carry its port, "tcp://host:port" (master_port is then
 * not used), or name an etcd cluster instead, "etcd://host:port[,...]"
 * ("etcds://" for TLS; CC_ETCD_* settings): no rank hosts a server then,
 * master_port is not used, and no reachability test runs.
 * Returns CC_ERR_INVALID_ARGUMENT, CC_ERR_NO_DEVICE, CC_ERR_RENDEZVOUS,
 * CC_ERR_AUTH, CC_ERR_MISMATCH, CC_ERR_TIMEOUT (naming the missing ranks),
 * CC_ERR_SYSTEM (hosts that cannot reach each other: who, where, why),
 * CC_ERR_PEER_FAILED (another rank's init failed or it died: naming it),
 * CC_ERR_CUDA, CC_ERR_NCCL. */
CC_API cc_result_t cc_comm_init(cc_comm_t* comm, int rank, int nranks, const char* master_addr,
                                int master_port, const cc_config_t* config);

/* As cc_comm_init, with rank, world size, local rank and rendezvous address
 * read from the environment (CC_*, torchrun, Open MPI, PMI, Slurm). A missing
 * or malformed variable is CC_ERR_INVALID_ARGUMENT naming the variable. */
CC_API cc_result_t cc_comm_init_from_env(cc_comm_t* comm, const cc_config_t* config);

/* Splits comm (ncclCommSplit): ranks passing the same color form a new
 * communicator, ordered by key. A negative color gives *newcomm = NULL.
 * Collective over comm; blocking. */
CC_API cc_result_t cc_comm_split(cc_comm_t comm, int color, int key, cc_comm_t* newcomm,
                                 const cc_config_t* config);

/* Compares every rank's calls up to its last (with CC_CHECK_CALLS on), and
 * how often each replayed the CUDA graphs that captured them, leaves the
 * rendezvous cleanly and frees the communicator. Blocking: it waits for
 * the other live ranks' destroy, up to the communicator's deadline. Returns
 * CC_ERR_MISMATCH, with cc_last_error() naming the first op (or graph
 * replay) whose calls differ and each side's, when they differ (the handle
 * is freed all the same). A communicator made by cc_comm_split is compared
 * through its parent: destroy it before the parent, in the same order on
 * every rank. NULL is a no-op. A communicator that failed is aborted, not
 * finalized, so this returns promptly. While CUDA graphs that captured its
 * calls are alive (cc counts them, with CC_CHECK_CALLS on or off), it
 * returns CC_ERR_INVALID_USAGE after a second, naming how many, and leaves
 * the communicator as it was, failed or not: NCCL waits for those graphs
 * without end. Destroy them first (the graphs and their executables), then
 * call it again. Not thread-safe against other calls on the same comm. */
CC_API cc_result_t cc_comm_destroy(cc_comm_t comm);

/* Aborts the communicator: pending NCCL work is stopped, the other ranks are
 * told, later calls return CC_ERR_ABORTED. Safe from any thread, more than
 * once; returns at once also on a communicator that already failed. While
 * CUDA graphs that captured its calls are alive it still returns at once:
 * NCCL's abort stops the work, then lets go of the communicator in the
 * background once those graphs are destroyed (cc logs a warning naming how
 * many). The handle must still be freed with cc_comm_destroy, which refuses
 * until they are. */
CC_API cc_result_t cc_comm_abort(cc_comm_t comm);

CC_API cc_result_t cc_comm_rank(cc_comm_t comm, int* rank);
CC_API cc_result_t cc_comm_size(cc_comm_t comm, int* nranks);
CC_API cc_result_t cc_comm_device(cc_comm_t comm, int* cuda_device);
/* The communicator's deadline in milliseconds, as init resolved it from
 * cc_config_t.timeout_ms, CC_TIMEOUT_MS or cc's default: what a blocking call
 * on comm waits at most. For a binding that waits on comm's work itself.
 * Never blocks. */
CC_API cc_result_t cc_comm_timeout(cc_comm_t comm, int* timeout_ms);
/* Which path serves cc_allreduce at which size on this comm, the same on every
 * rank: e.g. "ll:1M,oneshot:8M,blocks:64" (cc's LL kernel up to 1 MiB, its
 * one-shot kernel above that up to 8 MiB with at most 64 thread blocks,
 * ncclAllReduce above), or "nccl" for every size. Writes a NUL-terminated
 * string into plan (cap bytes; 128 always suffice). Returns
 * CC_ERR_INVALID_ARGUMENT when plan is NULL or cap too small. */
CC_API cc_result_t cc_comm_allreduce_plan(cc_comm_t comm, char* plan, size_t cap);

/* ------------------------------------------------------------ recovery
 * After a call returned CC_ERR_PEER_FAILED, CC_ERR_TIMEOUT or CC_ERR_ABORTED,
 * the survivors make the communicator's next generation: without the failed
 * ranks (shrink) or with replacements for them (regrow). The rendezvous
 * decides who is in it, so no two ranks disagree. Each is collective over
 * the ranks that are still alive: every one of them must make the same call
 * (a rank that does not is named at the deadline). Blocking; timeout_ms <= 0
 * means comm's deadline (timeout_ms / CC_TIMEOUT_MS). On success *newcomm is
 * a new communicator and comm is left as it was: destroy it after (the old
 * generation's results cannot be trusted). A second failure while the new
 * generation is made fails the call with words (CC_ERR_PEER_FAILED); call it
 * again on the same comm. Needs cc's own rendezvous (cc-run, cc-rendezvous,
 * or rank 0's while rank 0 lives: with the server embedded in rank 0, rank
 * 0's death cannot be recovered). A communicator made by cc_comm_split
 * cannot be recovered (CC_ERR_INVALID_USAGE): recover its parent and split
 * again. Other errors: CC_ERR_MISMATCH (ranks made different calls, or this
 * rank was already given up on), CC_ERR_TIMEOUT (naming who never came),
 * CC_ERR_RENDEZVOUS, CC_ERR_NCCL. */

/* The ranks that are alive go on alone: ranks keep their order and are
 * numbered densely from 0. Uses ncclCommShrink where the NCCL loaded has it
 * (2.27+) and every survivor's comm can still serve it (CC_NCCL_SHRINK=0
 * turns that off), else a new NCCL communicator. Also works with no failure
 * (the same ranks, one generation more). */
CC_API cc_result_t cc_comm_shrink(cc_comm_t comm, int timeout_ms, cc_comm_t* newcomm);

/* Waits until the job has nranks ranks again, then makes a communicator of
 * that size: survivors keep their numbers; each missing rank is filled by a
 * replacement, a new process started with that rank's number (RANK) which
 * calls cc_comm_init / cc_comm_init_from_env as usual and gets a communicator
 * of generation > 0 (it may start before or after the survivors call).
 * cc-run --max-restarts starts replacements. nranks < 1 is
 * CC_ERR_INVALID_ARGUMENT. */
CC_API cc_result_t cc_comm_regrow(cc_comm_t comm, int nranks, int timeout_ms, cc_comm_t* newcomm);

/* The communicator's generation: 0 for one made by cc_comm_init, one more
 * for each cc_comm_shrink or cc_comm_regrow. A replacement's communicator has
 * generation > 0: it should take its state from a survivor. Error words name
 * the generation. Never blocks. */
CC_API cc_result_t cc_comm_generation(cc_comm_t comm, int* generation);

/* Failed ranks. On a communicator made by cc_comm_shrink or cc_comm_regrow
 * (or a replacement's): the ranks of the previous generation, in its
 * numbering, that this one left out or replaced, as the rendezvous decided
 * (the same list on every rank), so the application can re-shard its data.
 * On a generation-0 communicator: the ranks the rendezvous has announced as
 * failed so far (not those that only aborted). *count gets how many there
 * are; at most cap are written to ranks (cap 0 with ranks NULL asks the
 * count). Never blocks; thread-safe. */
CC_API cc_result_t cc_comm_failed_ranks(cc_comm_t comm, int* ranks, int cap, int* count);

/* Whether comm still works: CC_SUCCESS, else the error its next call would
 * return (CC_ERR_PEER_FAILED, CC_ERR_TIMEOUT, CC_ERR_ABORTED) with its words.
 * A failure is declared before NCCL is aborted, so CC_SUCCESS after waiting
 * for a stream means the collectives that stream ran on comm completed with
 * every rank's data: the moment to commit a training step. Never blocks;
 * thread-safe. */
CC_API cc_result_t cc_comm_check(cc_comm_t comm);

/* Writes comm's flight recorder: its last CC_TRACE_BUFFER calls (sequence
 * number, call, count, type, op, root or peer, stream, when each was
 * enqueued and seen complete) and the fingerprint of its calls, as JSON into
 * dir (NULL = CC_TRACE_DIR), one file per rank named
 * cc-trace.JOB.cCOMM.gGENERATION.rRANK.json; `cc-doctor trace DIR` reads
 * every rank's. Works on a failed communicator too, and does not wait for
 * NCCL or the GPU: it only writes a file. Every rank writes it by itself on
 * a failure, a timeout or a mismatch (when CC_TRACE_DIR is set) and on
 * SIGUSR1. Returns CC_ERR_INVALID_ARGUMENT when dir is NULL and CC_TRACE_DIR
 * is unset, CC_ERR_SYSTEM when the file cannot be written. Thread-safe. */
CC_API cc_result_t cc_comm_dump_trace(cc_comm_t comm, const char* dir);

/* --------------------------------------------------------- collectives
 * All are stream-ordered and enqueue-only, like NCCL: they return once the
 * work is queued on `stream` (NULL = the default stream). sendbuf == recvbuf
 * is in-place where the operation allows it. A NULL buffer with a non-zero
 * count, a root or peer out of range, an unknown datatype or op, a byte size
 * that overflows, or a NULL/destroyed comm is CC_ERR_INVALID_ARGUMENT.
 * NCCL failures are CC_ERR_NCCL with NCCL's own words, but for NCCL's
 * remote error (a peer's process exited or its network went away): that is
 * CC_ERR_PEER_FAILED, naming the rank when that is known within half a
 * second, and recoverable as any peer's failure. Calls on one comm
 * must come from one thread at a time (as in NCCL). */

CC_API cc_result_t cc_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                cc_datatype_t dtype, cc_redop_t op, cc_comm_t comm,
                                cc_stream_t stream);
CC_API cc_result_t cc_broadcast(const void* sendbuf, void* recvbuf, size_t count,
                                cc_datatype_t dtype, int root, cc_comm_t comm, cc_stream_t stream);
/* recvbuf matters on root only. */
CC_API cc_result_t cc_reduce(const void* sendbuf, void* recvbuf, size_t count, cc_datatype_t dtype,
                             cc_redop_t op, int root, cc_comm_t comm, cc_stream_t stream);
/* recvbuf holds nranks * sendcount elements; in-place when
 * sendbuf == recvbuf + rank * sendcount. */
CC_API cc_result_t cc_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                cc_datatype_t dtype, cc_comm_t comm, cc_stream_t stream);
/* sendbuf holds nranks * recvcount elements; in-place when
 * recvbuf == sendbuf + rank * recvcount. */
CC_API cc_result_t cc_reducescatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                    cc_datatype_t dtype, cc_redop_t op, cc_comm_t comm,
                                    cc_stream_t stream);
/* Each rank sends `count` elements to every rank: both buffers hold
 * nranks * count elements. Not in-place. */
CC_API cc_result_t cc_alltoall(const void* sendbuf, void* recvbuf, size_t count,
                               cc_datatype_t dtype, cc_comm_t comm, cc_stream_t stream);
CC_API cc_result_t cc_send(const void* buf, size_t count, cc_datatype_t dtype, int peer,
                           cc_comm_t comm, cc_stream_t stream);
CC_API cc_result_t cc_recv(void* buf, size_t count, cc_datatype_t dtype, int peer, cc_comm_t comm,
                           cc_stream_t stream);
/* A stream-ordered barrier: a 1-element all-reduce on a scratch buffer. */
CC_API cc_result_t cc_barrier(cc_comm_t comm, cc_stream_t stream);
/* Group calls: operations between start and end are fused (ncclGroupStart/End).
 * Per thread; may nest. */
CC_API cc_result_t cc_group_start(void);
CC_API cc_result_t cc_group_end(void);

/* ----------------------------------------------------------- fast paths
 * Memory NCCL reaches without copies, registration, and CUDA graphs.
 *
 * CUDA graphs: the collectives, cc_send/cc_recv, cc_barrier and
 * cc_group_start/end may be captured (stream capture on the stream passed);
 * a replay runs NCCL's kernels with no work from cc on the host. Rules, as
 * NCCL's: every rank captures the same operations in the same order and
 * replays its graph as often as the others (with CC_CHECK_CALLS on, cc adds
 * one host node to each graph, which counts its replays for cc_comm_destroy
 * to compare: synchronize the stream before destroying); arguments are
 * checked when captured, not when replayed, so the buffers captured must
 * stay allocated;
 * the comm must not be destroyed (cc_comm_destroy) while a graph that
 * captured it can still be launched: destroy the graphs and their
 * executables first (cc_comm_destroy refuses while one is alive);
 * graphs using one comm must not run concurrently with each other or with
 * direct calls on that comm (keep them ordered on one stream). A failed
 * peer or cc_comm_abort during a replay is not reported by the replay:
 * wait for the stream with a deadline and check the next cc call's result.
 * Registration and cc_mem_alloc/free must not be captured. */

/* Allocates size bytes on the current CUDA device with ncclMemAlloc: memory
 * NCCL can map for its zero-copy and symmetric paths. Blocking; thread-safe.
 * *ptr is NULL on failure. Returns CC_ERR_INVALID_ARGUMENT (ptr NULL, size
 * 0), CC_ERR_NO_DEVICE, CC_ERR_NCCL or CC_ERR_CUDA (out of device memory). */
CC_API cc_result_t cc_mem_alloc(void** ptr, size_t size);
/* Frees memory from cc_mem_alloc (ncclMemFree); deregister it first. NULL is
 * a no-op. Blocking; thread-safe. */
CC_API cc_result_t cc_mem_free(void* ptr);

/* Registers buf[0, size) with comm (ncclCommRegister) so collectives on it
 * can skip NCCL's staging copies; *handle is for cc_comm_deregister. Local
 * to this rank (not collective); blocking. Buffers from cc_mem_alloc gain
 * most. Deregister before freeing buf or destroying comm. */
CC_API cc_result_t cc_comm_register(cc_comm_t comm, void* buf, size_t size, void** handle);
/* Undoes cc_comm_register. A NULL handle is a no-op. Blocking. */
CC_API cc_result_t cc_comm_deregister(cc_comm_t comm, void* handle);

/* Registers buf[0, size) as a symmetric window (ncclCommWindowRegister with
 * NCCL_WIN_COLL_SYMMETRIC): collectives whose buffers all lie in windows, at
 * the same offset on every rank, take NCCL's symmetric (low-latency)
 * kernels. Collective: every rank calls it, in the same order, with the same
 * size. buf should come from cc_mem_alloc. Blocking. Needs NCCL 2.27 or
 * newer at run time; an older one is CC_ERR_INVALID_USAGE naming the version
 * loaded. *window is for cc_comm_window_deregister. */
CC_API cc_result_t cc_comm_window_register(cc_comm_t comm, void* buf, size_t size, void** window);
/* Undoes cc_comm_window_register. Collective, like the registration. A NULL
 * window is a no-op. Blocking. */
CC_API cc_result_t cc_comm_window_deregister(cc_comm_t comm, void* window);

/* ---------------------------------------------------------------- store
 * A key-value store on the rendezvous server, for the application's own
 * metadata. Keys live in the job's namespace (job_id, NULL = the config's or
 * CC_JOB_ID, else "default"). A store handle is not thread-safe.
 *
 * A job's keys outlive store handles and communicators: they stay until
 * deleted, or until the job has had no connection for the server's job TTL
 * (cc-rendezvous --job-ttl, default 1 hour; config.job_ttl_ms for
 * cc_server_start; rank 0's embedded server keeps them for its lifetime).
 * A full store (keys or bytes per job, bytes in all, jobs) refuses the write
 * with CC_ERR_RENDEZVOUS naming the limit and the flag that raises it; it
 * never drops keys to make room. */

/* Connects, retrying with backoff until the config's timeout_ms; on failure
 * CC_ERR_RENDEZVOUS naming the address, CC_ERR_AUTH, or CC_ERR_TIMEOUT.
 * addr "tcp://host:port" carries its port; addr "etcd://host:port[,...]"
 * (or "etcds://") keeps the job's keys in an etcd cluster, with the same
 * calls and words. With both, port is not used. */
CC_API cc_result_t cc_store_connect(cc_store_t* store, const char* addr, int port,
                                    const char* job_id, const cc_config_t* config);
CC_API cc_result_t cc_store_set(cc_store_t store, const char* key, const void* value, size_t len);
/* Waits until the key exists (timeout_ms < 0: the store's default deadline,
 * 0: do not wait), then copies it into buf. *len is always set to the value's
 * length; a value longer than cap is CC_ERR_BUFFER_TOO_SMALL and copies
 * nothing. CC_ERR_TIMEOUT when the key did not appear in time. */
CC_API cc_result_t cc_store_get(cc_store_t store, const char* key, void* buf, size_t cap,
                                size_t* len, int timeout_ms);
/* Atomically adds delta to the integer under key (absent = 0); *result gets
 * the new value (result may be NULL). */
CC_API cc_result_t cc_store_add(cc_store_t store, const char* key, int64_t delta, int64_t* result);
/* Waits until every key exists; CC_ERR_TIMEOUT naming the missing ones. */
CC_API cc_result_t cc_store_wait(cc_store_t store, const char* const* keys, int nkeys,
                                 int timeout_ms);
/* Deletes key. Blocking, within the store's deadline. Deleting an absent key
 * succeeds. A cc_store_get or cc_store_wait waiting for the key keeps waiting
 * (until it is set again or its own deadline). */
CC_API cc_result_t cc_store_delete(cc_store_t store, const char* key);
/* Atomically sets key to desired (desired_len bytes) if its current value is
 * exactly expected (expected_len bytes; an empty expected value matches an
 * empty value, never an absent key), or, with expected NULL (and
 * expected_len 0), only if the key is absent: for leader election and
 * once-only set-up. *swapped (may be NULL) is 1 when this call set the key,
 * 0 when the value (or presence) did not match and nothing changed. Of many
 * racing calls on one key, exactly one swaps. A key it sets wakes waiting
 * gets and waits, as cc_store_set does. Blocking, within the store's
 * deadline; CC_ERR_RENDEZVOUS when the store is full. */
CC_API cc_result_t cc_store_compare_set(cc_store_t store, const char* key, const void* expected,
                                        size_t expected_len, const void* desired,
                                        size_t desired_len, int* swapped);
CC_API cc_result_t cc_store_close(cc_store_t store); /* NULL is a no-op */

/* ---------------------------------------------------------------- server
 * An embedded rendezvous server, the same one cc-rendezvous runs, on its own
 * thread. It keeps a job's keys for config->job_ttl_ms (CC_JOB_TTL_MS,
 * default 1 hour) after the job's last connection closed, and until
 * cc_server_stop. */
CC_API cc_result_t cc_server_start(cc_server_t* server, const char* bind_addr,
                                   int port /* 0 = any free port */, const cc_config_t* config);
CC_API cc_result_t cc_server_port(cc_server_t server, int* port);
/* Stops the server; every client still waiting gets an error. NULL is a no-op. */
CC_API cc_result_t cc_server_stop(cc_server_t server);

/* ---------------------------------------------------------------- misc */

/* Static text for a result code ("CC_ERR_TIMEOUT: a deadline passed"). */
CC_API const char* cc_result_string(cc_result_t result);
/* This thread's last failure, in words; "" when none. Valid until the next
 * cc call on this thread. */
CC_API const char* cc_last_error(void);
/* CC_VERSION_CODE of the library actually loaded. */
CC_API int cc_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CC_CC_H */

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
 * The mpi recipe's benchmark: an MPI ping-pong, compiled in the image
 * (mpicc, then the compilers purged) as /usr/local/bin/bmc-mpi-pingpong.
 *
 *     bmc-mpi-pingpong ITERATIONS BYTES
 *
 * Rank 0 exchanges a message of BYTES with every other rank in turn:
 * WARMUP round trips not counted, then ITERATIONS timed ones (rank 0
 * sends, the peer receives and sends the same back).  A peer's latency is
 * half the mean round trip.  Rank 0 gathers every rank's processor name
 * (MPI_Get_processor_name: the host name) and prints one line per rank,
 * "bmc-mpi-pingpong: rank R on NAME", then one JSON object whose last
 * key is "latency_us", the mean of the peers' latencies.  The entrypoint
 * (mpi.sh) checks the ranks' names and adds its own keys in front.
 *
 * Bad arguments: a message on stderr and MPI_Abort with status 2.
 */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "bmc-mpi-pingpong"
#define MAX_ITERATIONS 1000000L
#define MAX_BYTES (16L << 20)
#define WARMUP_MAX 100L
#define TAG 7

/* This process's rank (rank 0 alone says what is wrong with the
 * arguments: every rank would). */
static int me;

static void refuse(const char *what)
{
    if (me == 0)
        fprintf(stderr, PROG ": %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void *alloc(size_t bytes)
{
    void *p = calloc(1, bytes);

    if (!p) {
        fprintf(stderr, PROG ": rank %d: out of memory\n", me);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static long whole(const char *text, long min, long max, const char *what)
{
    long value;

    if (!text || !*text || strspn(text, "0123456789") != strlen(text)
            || strlen(text) > 10)
        refuse(what);
    value = strtol(text, NULL, 10);
    if (value < min || value > max)
        refuse(what);
    return value;
}

/* The host name as a JSON string may hold it without escapes (a DNS name
 * has nothing else). */
static void clean(char *name)
{
    for (char *p = name; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789.-_", *p))
            *p = '?';
}

/* Round trips between rank 0 and ``peer``: seconds of ``count`` of them,
 * on rank 0 (0.0 on the peer). */
static double exchange(int rank, int peer, char *buf, int bytes, long count)
{
    double start = MPI_Wtime();

    for (long i = 0; i < count; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, peer, TAG, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, peer, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
        }
    }
    return rank == 0 ? MPI_Wtime() - start : 0.0;
}

int main(int argc, char **argv)
{
    int rank, size, len, major, minor;
    char name[MPI_MAX_PROCESSOR_NAME];
    char *names = NULL, *buf;
    double *latency = NULL, sum = 0.0;
    long iterations, bytes, warmup;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    me = rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3)
        refuse("usage: " PROG " ITERATIONS BYTES");
    iterations = whole(argv[1], 1, MAX_ITERATIONS,
                       "ITERATIONS must be a whole number from 1 to 1000000");
    bytes = whole(argv[2], 0, MAX_BYTES,
                  "BYTES must be a whole number from 0 to 16777216");
    if (size < 2)
        refuse("a ping-pong needs 2 ranks or more");
    warmup = iterations < WARMUP_MAX ? iterations : WARMUP_MAX;

    memset(name, 0, sizeof(name));
    MPI_Get_processor_name(name, &len);
    clean(name);
    if (rank == 0) {
        names = alloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
        latency = alloc((size_t)size * sizeof(double));
    }
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names,
               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    buf = alloc((size_t)bytes + 1);

    for (int peer = 1; peer < size; peer++) {
        if (rank != 0 && rank != peer) {
            MPI_Barrier(MPI_COMM_WORLD);
            continue;
        }
        exchange(rank, peer, buf, (int)bytes, warmup);
        double seconds = exchange(rank, peer, buf, (int)bytes, iterations);
        if (rank == 0)
            latency[peer] = seconds / (2.0 * iterations) * 1e6;
        MPI_Barrier(MPI_COMM_WORLD);
    }

    if (rank == 0) {
        MPI_Get_version(&major, &minor);
        for (int r = 0; r < size; r++)
            printf(PROG ": rank %d on %s\n", r,
                   names + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("{\"bytes\": %ld, \"iterations\": %ld, \"mpi\": \"%d.%d\", "
               "\"peer_latency_us\": [", bytes, iterations, major, minor);
        for (int peer = 1; peer < size; peer++) {
            printf("%s%.3f", peer > 1 ? ", " : "", latency[peer]);
            sum += latency[peer];
        }
        printf("], \"ranks\": [");
        for (int r = 0; r < size; r++)
            printf("%s\"%s\"", r ? ", " : "",
                   names + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("], \"size\": %d, \"warmup\": %ld, \"latency_us\": %.3f}\n",
               size, warmup, sum / (size - 1));
        fflush(stdout);
    }
    free(buf);
    free(names);
    free(latency);
    MPI_Finalize();
    return 0;
}

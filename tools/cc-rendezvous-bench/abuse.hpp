// The rendezvous under abuse. run_abuse: a healthy job of `members` ranks
// heartbeats against a server in a child process while each abuse runs
// beside it in turn (parked gets closed at once, a Set waking many waiters,
// many waits expiring together, clients that leave big replies unread,
// oversized hellos, a client that pipelines steadily); prints, per abuse,
// the healthy job's largest heartbeat gap and the server's peak memory, then
// how long the server took to stop on SIGTERM with clients that do not read.
// run_core_events: the server's core alone, without sockets: the longest
// single call while one Set wakes n waiters, n deadlines pass together, and a
// connection closes holding n parked gets. False when a run could not be made.
#pragma once

namespace cc::tools::rendezvous_bench {

bool run_abuse(int members);
bool run_core_events(int n);

}  // namespace cc::tools::rendezvous_bench

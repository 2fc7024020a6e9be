// STUB: the socket-free server state machine (owned by the rendezvous work).
#pragma once

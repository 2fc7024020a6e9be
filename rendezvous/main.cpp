// STUB: cc-rendezvous daemon.
int main() { return 1; }

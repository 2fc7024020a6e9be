# The seed guide's broadcast example ("PyTorch NCCL", Common NCCL Operations),
# with its setup/cleanup (section 1) and a main in the form of its section 3
# (both in seed_common.py, which the three seed scripts share).
# Changed from the guide: `import cc.torch`, and "nccl" -> "cc". Nothing else.
import torch
import torch.distributed as dist
import cc.torch
from seed_common import setup, cleanup, main

# Broadcast operation
def broadcast_example(rank, world_size):
    setup(rank, world_size)
    
    # Create tensor only on rank 0
    if rank == 0:
        tensor = torch.tensor([1.0, 2.0, 3.0], device=rank)
    else:
        tensor = torch.zeros(3, device=rank)
    
    print(f"Rank {rank} before broadcast: {tensor}")
    
    # Broadcast from rank 0 to all others
    dist.broadcast(tensor, src=0)
    
    print(f"Rank {rank} after broadcast: {tensor}")
    
    cleanup()

if __name__ == "__main__":
    main(broadcast_example)

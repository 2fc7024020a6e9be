# The seed guide's all-reduce example ("PyTorch NCCL", Common NCCL Operations),
# with its setup/cleanup (section 1) and a main in the form of its section 3
# (both in seed_common.py, which the three seed scripts share).
# Changed from the guide: `import cc.torch`, and "nccl" -> "cc". Nothing else.
import torch
import torch.distributed as dist
import cc.torch
from seed_common import setup, cleanup, main

# All-reduce operation
def all_reduce_example(rank, world_size):
    setup(rank, world_size)
    
    # Create tensor on current GPU
    tensor = torch.ones(10) * (rank + 1)
    tensor = tensor.to(rank)
    
    print(f"Rank {rank} before all-reduce: {tensor[0].item()}")
    
    # Perform all-reduce (sum operation)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    
    print(f"Rank {rank} after all-reduce: {tensor[0].item()}")
    
    cleanup()

if __name__ == "__main__":
    main(all_reduce_example)

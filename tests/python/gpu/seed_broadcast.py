# The seed guide's broadcast example ("PyTorch NCCL", Common NCCL Operations),
# with its setup/cleanup (section 1) and a main in the form of its section 3.
# Changed from the guide: `import cc.torch`, and "nccl" -> "cc". Nothing else.
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import cc.torch

def setup(rank, world_size):
    """Initialize the distributed environment."""
    os.environ['MASTER_ADDR'] = 'localhost'
    os.environ['MASTER_PORT'] = '12355'
    
    # Initialize the process group with NCCL backend
    dist.init_process_group("cc", rank=rank, world_size=world_size)
    
    # Set device for this process
    torch.cuda.set_device(rank)

def cleanup():
    """Clean up the distributed environment."""
    dist.destroy_process_group()

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

def main():
    # Number of GPUs available
    world_size = torch.cuda.device_count()
    print(f"Using {world_size} GPUs for training")
    
    # Spawn processes
    mp.spawn(broadcast_example, args=(world_size,), nprocs=world_size, join=True)

if __name__ == "__main__":
    main()

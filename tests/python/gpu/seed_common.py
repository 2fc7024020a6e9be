# The seed guide's setup/cleanup ("PyTorch NCCL", section 1) and the main of
# its section 3, which its all-reduce, broadcast and DDP examples (seed_*.py)
# share. Changed from the guide: "nccl" -> "cc", and main takes the example
# it spawns.
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

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

def main(example):
    # Number of GPUs available
    world_size = torch.cuda.device_count()
    print(f"Using {world_size} GPUs for training")
    
    # Spawn processes
    mp.spawn(example, args=(world_size,), nprocs=world_size, join=True)

# The seed guide's DDP training example ("PyTorch NCCL", Setting Up
# NCCL-Based Distributed Training, sections 1-3).
# Changed from the guide: `import cc.torch`, and "nccl" -> "cc". Nothing else.
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
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

def train(rank, world_size):
    # Setup the process group
    setup(rank, world_size)
    
    # Create model and move it to the GPU
    model = torch.nn.Linear(10, 10).to(rank)
    
    # Wrap the model with DDP
    ddp_model = DDP(model, device_ids=[rank])
    
    # Create optimizer
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.001)
    
    # Training loop
    for epoch in range(10):
        # Create dummy data
        inputs = torch.randn(20, 10).to(rank)
        targets = torch.randn(20, 10).to(rank)
        
        # Forward pass
        outputs = ddp_model(inputs)
        loss = torch.nn.functional.mse_loss(outputs, targets)
        
        # Backward pass
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        
        # Print progress
        if rank == 0 and epoch % 2 == 0:
            print(f"Epoch {epoch}, Loss: {loss.item()}")
    
    # Cleanup
    cleanup()

def main():
    # Number of GPUs available
    world_size = torch.cuda.device_count()
    print(f"Using {world_size} GPUs for training")
    
    # Spawn processes
    mp.spawn(train, args=(world_size,), nprocs=world_size, join=True)

if __name__ == "__main__":
    main()

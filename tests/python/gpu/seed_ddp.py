# The seed guide's DDP training example ("PyTorch NCCL", Setting Up
# NCCL-Based Distributed Training, sections 1-3), with its setup, cleanup and
# main in seed_common.py, which the three seed scripts share.
# Changed from the guide: `import cc.torch`, and "nccl" -> "cc". Nothing else.
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
import cc.torch
from seed_common import setup, cleanup, main

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

if __name__ == "__main__":
    main(train)

"""DoorKey-5x5: frames to 0.9, transfer to 16x16 and throughput (``summarize``)."""

"""What the benches share: the parts they run on (harness) and how they measure (measure); a folder of its
own, so that the benches and their subfolders all import it and none imports the others back."""

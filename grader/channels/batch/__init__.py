"""`python -m grader grade-all`: grade a whole class, job by job, into one gradebook."""

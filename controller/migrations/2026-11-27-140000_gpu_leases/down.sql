DROP TABLE gpu_leases;
DROP TABLE course_gpu_modes;

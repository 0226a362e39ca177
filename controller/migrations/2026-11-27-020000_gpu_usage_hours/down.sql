DROP TABLE gpu_usage_hours;

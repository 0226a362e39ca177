DROP TABLE course_networks;

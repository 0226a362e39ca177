DROP TABLE node_images;
DROP TABLE images;

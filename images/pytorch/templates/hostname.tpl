{{ instance.name }}

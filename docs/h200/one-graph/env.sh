# Sourced at the start of every device run: the Vulkan loader into /, the
# binary's other libraries under /root/w/libs, the NVIDIA ICD.
for f in .device/debs/libvulkan1* .device/debs/libegl1* .device/debs/libglvnd0* .device/debs/libopengl0* .device/debs/libgl1* .device/debs/libglx0* .device/debs/libgles2*; do dpkg -x $f /; done
mkdir -p /root/w/libs
for f in .device/debs/libasound2* .device/debs/libx11* .device/debs/libxcb1* .device/debs/libxau6* .device/debs/libxdmcp6* .device/debs/libbsd0* .device/debs/libmd0*; do dpkg -x $f /root/w/libs; done
ldconfig
export LD_LIBRARY_PATH=/root/w/libs/usr/lib/x86_64-linux-gnu:/root/w/libs/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
